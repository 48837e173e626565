"""A resource's free devices, and the picker that reserves devices for one container as it takes them."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping


class FreeDevices(set[str]):
    """A resource's free devices that can also name its smallest ID without walking all of them.

    Picking one device is the usual admission; `min()` over 10^4 free IDs for each made admission
    O(devices). A heap built on first use answers it instead; removals are lazy (an ID no longer in
    the set is popped when it reaches the top), so `discard` and `difference_update` stay plain set
    calls. Additions must go through `give_back`. Set operators return plain sets.
    """

    __slots__ = ("_heap",)

    def __init__(self, ids: Iterable[str] = ()) -> None:
        super().__init__(ids)
        self._heap: list[str] | None = None

    def smallest(self, count: int) -> list[str]:
        """The `count` smallest IDs, smallest first (fewer if the set has fewer)."""
        if count != 1:
            return heapq.nsmallest(count, self)
        heap = self._heap
        if heap is None:
            heap = self._heap = list(self)
            heapq.heapify(heap)
        while heap and heap[0] not in self:
            heapq.heappop(heap)
        return heap[:1]

    def give_back(self, ids: Iterable[str]) -> None:
        for d in ids:
            if d not in self:
                self.add(d)
                if self._heap is not None:
                    heapq.heappush(self._heap, d)


class Picker:
    """Collects `needed` devices for one container from successive candidate sets.

    Every pick also goes into `reserved` (the resource's in-flight set) at once, so a concurrent
    allocation that runs while this one awaits a plugin cannot hand out the same device, and leaves the
    resource's free set in `free_sets` (looked up at each pick: the owner may rebuild it meanwhile).
    """

    def __init__(
        self,
        needed: int,
        reserved: set[str],
        free_sets: Mapping[str, set[str]] | None = None,
        resource: str = "",
    ) -> None:
        self.needed = needed
        self.picked: set[str] = set()
        self._reserved = reserved
        self._free_sets = free_sets if free_sets is not None else {}
        self._resource = resource

    def take(self, candidates: Iterable[str] | None) -> bool:
        """Take from `candidates` (smallest IDs first, for determinism); True once enough were taken."""
        if candidates is None or self.needed <= 0:
            return self.needed <= 0
        if self.picked:
            chosen = heapq.nsmallest(self.needed, [d for d in candidates if d not in self.picked])
        elif isinstance(candidates, FreeDevices):
            chosen = candidates.smallest(self.needed)
        else:
            # Every candidate is fresh: let nsmallest (min() for one device) walk the set in C instead
            # of filtering 10^5 IDs in Python first.
            chosen = heapq.nsmallest(self.needed, candidates)
        self.picked.update(chosen)
        self._reserved.update(chosen)
        self.needed -= len(chosen)
        free = self._free_sets.get(self._resource)
        if free is not None:
            free.difference_update(chosen)
        return self.needed == 0

    def release(self) -> None:
        """Give the picks back (the allocation failed or they were recorded elsewhere)."""
        self._reserved.difference_update(self.picked)
