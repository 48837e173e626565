"""The claim constraint `distinctAttribute` (upstream's `constraint.go`, KEP-5075): every device of the named
requests has the attribute, each with a different type or value. It keeps the requests of one claim on
different physical devices when those may be shared (allowMultipleAllocations); `matchAttribute`, its
inverse, is search.py's MatchAttribute.
"""

from __future__ import annotations

from collections import Counter

from kubedevice.resource.model import DeviceConstraint
from kubedevice.scheduler.search import Candidate, constraint_applies, lookup_attribute

__all__ = ["DistinctAttribute"]


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
