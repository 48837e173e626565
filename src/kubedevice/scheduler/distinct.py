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
    """Counts the values taken: a device whose value is already taken (by any device of the named
    requests, of the same request too) is refused, and giving a device back frees its value."""

    def __init__(self, constraint: DeviceConstraint, attribute: str) -> None:
        self._requests = frozenset(constraint.requests)
        self._attribute = attribute
        self._taken: Counter[tuple[str, int | bool | str]] = Counter()

    def add(self, request: str, subrequest: str, candidate: Candidate) -> bool:
        if not constraint_applies(self._requests, request, subrequest):
            return True
        value = lookup_attribute(candidate, self._attribute)
        if value is None:
            return False
        key = (value.kind, value.value)
        if self._taken[key]:
            return False
        self._taken[key] += 1
        return True

    def remove(self, request: str, subrequest: str, candidate: Candidate) -> None:
        if not constraint_applies(self._requests, request, subrequest):
            return
        value = lookup_attribute(candidate, self._attribute)
        if value is not None:
            self._taken[(value.kind, value.value)] -= 1
