"""Topology hints: the device manager as the topology manager's hint provider (the kubelet's
`topology_hints.go`: `GetTopologyHints`, `GetPodTopologyHints` and `generateDeviceTopologyHints`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import combinations

from kubedevice.manager.allocator import Allocator
from kubedevice.manager.devices import ResourceDevices
from kubedevice.manager.state import ManagerState
from kubedevice.manager.types import RESTART_POLICY_ALWAYS, Container, Pod, TopologyHint
from kubedevice.topology.bitmask import MAX_BIT, BitMask

#: resource -> devices reusable by the container.
_Devices = Callable[[str], set[str]]
#: resource -> device ID -> NUMA nodes, of the devices held by the container or pod (from the checkpoint).
_Held = dict[str, dict[str, tuple[int, ...]]]
#: resource -> hints; None for a resource without topology (no preference), [] when it cannot be satisfied.
ResourceHints = dict[str, list[TopologyHint] | None]


def pod_device_requests(pod: Pod) -> dict[str, int]:
    """The pod-level request of each resource (the kubelet's sidecar-aware PodLimits).

    App containers and sidecars (restartable init containers) run together; a regular init container runs
    alone beside the sidecars started before it. The request is the larger of the two peaks.
    """
    app: dict[str, int] = {}
    init: dict[str, int] = {}
    side: dict[str, int] = {}
    for c in pod.init_containers:
        restartable = c.restart_policy == RESTART_POLICY_ALWAYS
        if restartable:
            for r, n in c.limits.items():
                side[r] = side.get(r, 0) + n
                app[r] = app.get(r, 0) + n
        for r in set(c.limits) | set(side):
            use = side.get(r, 0) if restartable else c.limits.get(r, 0) + side.get(r, 0)
            init[r] = max(init.get(r, 0), use)
    for c in pod.containers:
        for r, n in c.limits.items():
            app[r] = app.get(r, 0) + n
    return {r: max(app.get(r, 0), init.get(r, 0)) for r in sorted(set(app) | set(init))}


class TopologyHints:
    """Per device-plugin resource of a container or a pod: which NUMA node sets could hold its devices."""

    def __init__(self, state: ManagerState, allocator: Allocator, numa_nodes: Iterable[int] | None) -> None:
        self._state = state
        self._allocator = allocator
        self._numa_nodes = sorted(set(numa_nodes)) if numa_nodes is not None else None
        #: The last resource's (node sets, nodes, mask_counts): one resource admitted after another reuses it.
        self._counts_cache: tuple[Counter[tuple[int, ...]], tuple[int, ...], list[int]] | None = None

    def get_topology_hints(self, pod: Pod, container: Container) -> ResourceHints:
        """One container's hints; devices of earlier init containers of the pod count as reusable."""
        self._allocator.update_allocated_devices()
        reuse = self._allocator.reuse.get(pod.uid, {})
        held = self._state.pod_devices.device_topology(pod.uid, container.name) or {}
        return self._hints(container.limits, held, lambda r: reuse.get(r, set()))

    def get_pod_topology_hints(self, pod: Pod) -> ResourceHints:
        """The whole pod's hints (pod scope): pod-level requests, devices held by any container, no reuse."""
        self._allocator.update_allocated_devices()
        held: _Held = {}
        for name in self._state.pod_devices.container_names(pod.uid):
            for resource, devices in (self._state.pod_devices.device_topology(pod.uid, name) or {}).items():
                held.setdefault(resource, {}).update(devices)
        return self._hints(pod_device_requests(pod), held, lambda _r: set())

    def _hints(self, requests: dict[str, int], held_by: _Held, reusable_of: _Devices) -> ResourceHints:
        hints: ResourceHints = {}
        for resource in sorted(requests):
            if not self._state.is_device_plugin_resource(resource):
                continue
            requested = requests[resource]
            devices = self._state.devices.get(resource)
            held_topology = held_by.get(resource, {})
            if held_topology and (devices is None or not devices.reported):
                # Restarted before the plugin is back: the checkpoint's NUMA nodes of the held devices
                # still give the hints they were admitted with.
                devices = ResourceDevices(topology={d: n for d, n in held_topology.items() if n})
                node_sets = Counter(devices.topology.values())
            elif devices is not None:
                node_sets = self._node_sets(resource, devices)
            if devices is None or not devices.has_topology:
                hints[resource] = None
                continue
            nodes = self._numa_nodes_for()
            all_counts = self._all_counts(node_sets, nodes)
            held = set(held_topology)
            if held:
                # Already allocated (a restart, or a pod admitted again): the same hints again.
                if len(held) != requested:
                    hints[resource] = []
                else:
                    hints[resource] = generate_topology_hints(
                        nodes, devices, held, set(), requested, all_counts
                    )
                continue
            available = self._allocator.available(resource)
            reusable = reusable_of(resource)
            if len(available | reusable) < requested:
                hints[resource] = []
                continue
            hints[resource] = generate_topology_hints(
                nodes, devices, available, reusable, requested, all_counts
            )
        return hints

    def _node_sets(self, resource: str, devices: ResourceDevices) -> Counter[tuple[int, ...]]:
        """Kept in the state until the resource's devices change."""
        node_sets = self._state.node_sets.get(resource)
        if node_sets is None:
            node_sets = self._state.node_sets[resource] = Counter(devices.topology.values())
        return node_sets

    def _all_counts(self, node_sets: Counter[tuple[int, ...]], nodes: Sequence[int]) -> list[int]:
        key = tuple(sorted(n for n in set(nodes) if 0 <= n <= MAX_BIT))
        cached = self._counts_cache
        if cached is None or cached[0] is not node_sets or cached[1] != key:
            cached = self._counts_cache = (node_sets, key, mask_counts(node_sets, key))
        return cached[2]

    def _numa_nodes_for(self) -> list[int]:
        if self._numa_nodes is not None:
            return self._numa_nodes
        nodes: set[int] = set()
        for resource_devices in self._state.devices.values():
            for node_ids in resource_devices.topology.values():
                nodes.update(node_ids)
        return sorted(nodes)


def _mask_value(nodes: Iterable[int]) -> int:
    # NUMA IDs a plugin reports beyond 0..63 cannot be in any machine mask: they touch no mask.
    return sum(1 << n for n in set(nodes) if 0 <= n <= MAX_BIT)


def generate_topology_hints(
    numa_nodes: Sequence[int],
    devices: ResourceDevices,
    available: set[str],
    reusable: set[str],
    request: int,
    all_counts: Sequence[int] | None = None,
) -> list[TopologyHint]:
    """Every NUMA node set holding `request` devices; the narrowest ones are preferred.

    Devices are grouped by their node set first, so the work per mask is the number of distinct node
    sets, not the number of devices. Masks come in the kubelet's order: by size, then lexicographic.
    `all_counts` is `mask_counts` of all the resource's devices, when the caller keeps it.
    """
    nodes = tuple(sorted(n for n in set(numa_nodes) if 0 <= n <= MAX_BIT))
    topology = devices.topology
    masks = _masks(nodes)
    if all_counts is None:
        all_counts = mask_counts(Counter(topology.values()), nodes)
    # The narrowest size that all devices of the resource (healthy or not, free or not) could fill.
    min_affinity_size = next(
        (entry[1] for entry, count in zip(masks, all_counts, strict=True) if count >= request), len(nodes)
    )
    free = mask_counts(Counter(map(topology.get, available)), nodes)
    # A reusable device without topology neither blocks a mask nor counts.
    reused = _groups(Counter(topology[d] for d in reusable if topology.get(d)).items())
    if reused:
        extra = sum(c for _, c in reused)
        found = [
            entry
            for entry, count in zip(masks, free, strict=True)
            if all(key & entry[0] for key, _ in reused) and count + extra >= request
        ]
    else:
        found = [entry for entry, count in zip(masks, free, strict=True) if count >= request]
    return [preferred if size == min_affinity_size else other for _, size, preferred, other in found]


def mask_counts(
    node_sets: Counter[tuple[int, ...]] | Counter[tuple[int, ...] | None], nodes: tuple[int, ...]
) -> list[int]:
    """For each mask of `_masks(nodes)`: how many of the devices (counted by node set) touch it."""
    groups = _groups(node_sets.items())
    masks = _masks(nodes)
    if any(key & (key - 1) for key, _ in groups):
        return [sum(count for key, count in groups if key & entry[0]) for entry in masks]
    # Every device on one node (the usual case): each mask's count is a smaller mask's (without its
    # lowest node, counted before it since masks come by size) plus that node's devices.
    per_node = dict(groups)
    by_mask = {0: 0}
    for entry in masks:
        mask = entry[0]
        lowest = mask & -mask
        by_mask[mask] = by_mask[mask ^ lowest] + per_node.get(lowest, 0)
    return [by_mask[entry[0]] for entry in masks]


def _groups(counts: Iterable[tuple[tuple[int, ...] | None, int]]) -> list[tuple[int, int]]:
    """(mask of the nodes, device count) per distinct node set; devices in no mask are left out."""
    out: dict[int, int] = {}
    for node_set, count in counts:
        key = _mask_value(node_set or ())
        if key:
            out[key] = out.get(key, 0) + count
    return list(out.items())


#: (mask value, node count, the mask's preferred hint, its non-preferred hint)
_Mask = tuple[int, int, TopologyHint, TopologyHint]


@functools.lru_cache(maxsize=8)
def _masks(nodes: tuple[int, ...]) -> tuple[_Mask, ...]:
    """Every non-empty subset of `nodes` in the kubelet's order, with its two (immutable) hints made once:
    building 255 hint objects per admission would cost more than choosing among them."""
    out: list[_Mask] = []
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            mask = BitMask.of(*combo)
            out.append((mask.value, size, TopologyHint(mask, True), TopologyHint(mask, False)))
    return tuple(out)
