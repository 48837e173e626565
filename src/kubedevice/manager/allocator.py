"""Choosing devices: reuse first, then the topology-aligned ones, the plugin's preference and the rest.

Pure functions and one small picker; the manager feeds them its state and does the plugin calls
(SPEC §5.3, §5.4, §5.5).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

from kubedevice.manager.devices import NO_TOPOLOGY, ResourceDevices
from kubedevice.manager.types import TopologyHint


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
    """Split `available` into (from the affinity, not from it, without topology) (SPEC §5.4).

    Each device goes to the first of its NUMA nodes in this order: nodes of the affinity, then the
    others, each by ascending number of available devices (ties by node ID), then "no topology".
    Without an affinity the third set is `available` itself (no copy of 10^5 IDs): callers only read them.
    """
    if affinity is None or not devices.has_topology:
        return set(), set(), available
    topology = devices.topology
    per_node: dict[int, int] = {}
    for d in available:
        for n in topology.get(d) or (NO_TOPOLOGY,):
            per_node[n] = per_node.get(n, 0) + 1
    order = sorted(per_node, key=lambda n: (n == NO_TOPOLOGY, n not in affinity, per_node[n], n))
    rank = {n: i for i, n in enumerate(order)}
    aligned: set[str] = set()
    unaligned: set[str] = set()
    without: set[str] = set()
    for d in available:
        nodes = topology.get(d)
        if not nodes:
            without.add(d)
            continue
        first = min(nodes, key=rank.__getitem__)
        (aligned if first in affinity else unaligned).add(d)
    return aligned, unaligned, without


def generate_topology_hints(
    numa_nodes: Sequence[int],
    devices: ResourceDevices,
    available: set[str],
    reusable: set[str],
    request: int,
) -> list[TopologyHint]:
    """Every NUMA node set holding `request` devices; the narrowest ones are preferred (SPEC §5.5).

    Devices are grouped by their node set first, so the work per mask is the number of distinct node
    sets, not the number of devices.
    """
    nodes = sorted(set(numa_nodes))

    def groups(ids: Iterable[str]) -> dict[frozenset[int], int]:
        out: dict[frozenset[int], int] = {}
        for d in ids:
            key = frozenset(devices.topology.get(d, ()))
            out[key] = out.get(key, 0) + 1
        return out

    all_groups = groups(devices.topology)
    available_groups = groups(available)
    reusable_groups = {k: v for k, v in groups(reusable).items() if k}

    min_affinity_size = len(nodes)
    hints: list[TopologyHint] = []
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            mask = frozenset(combo)
            in_mask = sum(c for k, c in all_groups.items() if k & mask)
            if in_mask >= request and size < min_affinity_size:
                min_affinity_size = size
            if any(not (k & mask) for k in reusable_groups):
                continue
            count = sum(reusable_groups.values()) + sum(c for k, c in available_groups.items() if k & mask)
            if count >= request:
                hints.append(TopologyHint(mask, preferred=False))
    return [TopologyHint(h.numa_affinity, len(h.numa_affinity) == min_affinity_size) for h in hints]
