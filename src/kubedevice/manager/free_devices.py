"""A resource's free devices, the picker that reserves devices for one container as it takes them, and
the split of the available devices by a container's NUMA affinity (the kubelet's filterByAffinity)."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import compress, repeat
from operator import eq

from kubedevice.manager.devices import NO_TOPOLOGY, ResourceDevices


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


def filter_by_affinity(
    available: set[str], devices: ResourceDevices, affinity: frozenset[int] | None
) -> tuple[set[str], set[str], set[str]]:
    """Split `available` into (from the affinity, not from it, without topology).

    Each device goes to the first of its NUMA nodes in this order: nodes of the affinity, then the
    others, each by ascending number of available devices (ties by node ID), then "no topology".
    Without an affinity the third set is `available` itself (no copy of 10^5 IDs): callers only read them.
    """
    if affinity is None or not devices.has_topology:
        return set(), set(), available
    # Devices are classed by their node tuple, of which there are few: the per-device work is C-level
    # maps over the IDs (a Python loop per device costs more than the rest of an admission).
    topology = devices.topology
    ids = list(available)
    node_sets = list(map(topology.get, ids))
    per_node: dict[int, int] = {}
    for nodes, count in Counter(node_sets).items():
        for n in nodes or (NO_TOPOLOGY,):
            per_node[n] = per_node.get(n, 0) + count
    order = sorted(per_node, key=lambda n: (n == NO_TOPOLOGY, n not in affinity, per_node[n], n))
    rank = {n: i for i, n in enumerate(order)}
    # 0: from the affinity, 1: not from it, 2: without topology.
    kind: dict[tuple[int, ...] | None, int] = {
        nodes: (2 if not nodes else 0 if min(nodes, key=rank.__getitem__) in affinity else 1)
        for nodes in set(node_sets)
    }
    kinds = list(map(kind.__getitem__, node_sets))
    aligned, unaligned, without = (set(compress(ids, map(eq, kinds, repeat(k)))) for k in (0, 1, 2))
    return aligned, unaligned, without
