"""The claim constraints (upstream's `constraint.go`): `matchAttribute`, every device of the named requests
has the attribute and their values meet; `distinctAttribute` (KEP-5075), every device of the named requests
has the attribute, each with a different value, which keeps the requests of one claim on different
physical devices when those may be shared (allowMultipleAllocations). The search tells a constraint of each
device it takes and gives back.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from kubedevice.resource.model import DeviceConstraint
from kubedevice.scheduler.candidate import Candidate, lookup_attribute

__all__ = ["Constraint", "DistinctAttribute", "MatchAttribute", "constraint_applies"]


class Constraint(Protocol):
    """A claim constraint, told of each device taken and given back (upstream's `constraint`)."""

    def add(self, request: str, subrequest: str, candidate: Candidate) -> bool:
        """Whether the device may be taken; when it may, it now counts."""
        ...

    def remove(self, request: str, subrequest: str, candidate: Candidate) -> None:
        """The device, added before, is given back."""
        ...


def constraint_applies(requests: frozenset[str], request: str, subrequest: str) -> bool:
    """Whether a constraint naming `requests` (none: every request) binds a device of this (sub)request."""
    if not requests:
        return True
    return request in requests or (bool(subrequest) and f"{request}/{subrequest}" in requests)


class MatchAttribute:
    """`matchAttribute`: every device of the named requests has the attribute, and their values meet.

    Set semantics, as upstream's allocator with DRAListTypeAttributes (constraint.go): a value is the set
    of its elements (a scalar is a set of one), and the devices match while the intersection of their
    sets is not empty; values of different kinds never meet. For scalars this is "the same type and
    value". Each device narrows the intersection; giving it back restores the one before (upstream keeps
    the narrowed one, which can miss an allocation the API's rule allows: see docs/kubelet-map.md).
    """

    def __init__(self, constraint: DeviceConstraint, attribute: str) -> None:
        self._requests = frozenset(constraint.requests)
        self.attribute = attribute
        #: The intersection after each device added, the last one current.
        self._sets: list[tuple[str, frozenset[int | bool | str]]] = []

    @property
    def current(self) -> tuple[str, frozenset[int | bool | str]] | None:
        """The (kind, values) every device added so far shares; None before the first one."""
        return self._sets[-1] if self._sets else None

    def meets(self, candidate: Candidate) -> tuple[str, frozenset[int | bool | str]] | None:
        """The intersection with the candidate added, or None when it cannot be added."""
        value = lookup_attribute(candidate, self.attribute)
        if value is None:
            return None
        kind, values = value.as_set()
        if self._sets:
            kind_now, now = self._sets[-1]
            values = values & now if kind == kind_now else frozenset()
            if not values:
                return None
        return kind, values

    def add(self, request: str, subrequest: str, candidate: Candidate) -> bool:
        if not constraint_applies(self._requests, request, subrequest):
            return True
        narrowed = self.meets(candidate)
        if narrowed is None:
            return False
        self._sets.append(narrowed)
        return True

    def remove(self, request: str, subrequest: str, candidate: Candidate) -> None:
        if constraint_applies(self._requests, request, subrequest):
            self._sets.pop()


class DistinctAttribute:
    """Counts the values taken: a device sharing a value with one already taken (by any device of the
    named requests, of the same request too) is refused, and giving a device back frees its values.

    Set semantics, as upstream with DRAListTypeAttributes: a value is the set of its elements (a scalar a
    set of one), and the devices' sets must be pairwise disjoint; values of different kinds never meet.
    For scalars this is "a different type or value"."""

    def __init__(self, constraint: DeviceConstraint, attribute: str) -> None:
        self._requests = frozenset(constraint.requests)
        self.attribute = attribute
        self._taken: Counter[tuple[str, int | bool | str]] = Counter()

    def add(self, request: str, subrequest: str, candidate: Candidate) -> bool:
        if not constraint_applies(self._requests, request, subrequest):
            return True
        value = lookup_attribute(candidate, self.attribute)
        if value is None:
            return False
        kind, values = value.as_set()
        keys = [(kind, v) for v in values]
        if any(self._taken[key] for key in keys):
            return False
        self._taken.update(keys)
        return True

    def remove(self, request: str, subrequest: str, candidate: Candidate) -> None:
        if not constraint_applies(self._requests, request, subrequest):
            return
        value = lookup_attribute(candidate, self.attribute)
        if value is not None:
            kind, values = value.as_set()
            self._taken.subtract((kind, v) for v in values)
