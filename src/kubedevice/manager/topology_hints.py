"""Topology hints: the device manager as the topology manager's hint provider (the kubelet's
`topology_hints.go`: `GetTopologyHints`, `GetPodTopologyHints` and `generateDeviceTopologyHints`).
"""

from __future__ import annotations

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
            if devices is None or not devices.has_topology:
                hints[resource] = None
                continue
            nodes = self._numa_nodes_for()
            held = set(held_topology)
            if held:
                # Already allocated (a restart, or a pod admitted again): the same hints again.
                same = len(held) == requested
                hints[resource] = (
                    generate_topology_hints(nodes, devices, held, set(), requested) if same else []
                )
                continue
            available = self._allocator.available(resource)
            reusable = reusable_of(resource)
            if len(available | reusable) < requested:
                hints[resource] = []
                continue
            hints[resource] = generate_topology_hints(nodes, devices, available, reusable, requested)
        return hints

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
) -> list[TopologyHint]:
    """Every NUMA node set holding `request` devices; the narrowest ones are preferred (SPEC §5.5).

    Devices are grouped by their node set first, so the work per mask is the number of distinct node
    sets, not the number of devices. Masks come in the kubelet's order: by size, then lexicographic.
    """
    nodes = sorted(set(numa_nodes))

    def groups(ids: Iterable[str]) -> dict[int, int]:
        out: dict[int, int] = {}
        topology = devices.topology
        for d in ids:
            key = _mask_value(topology.get(d, ()))
            out[key] = out.get(key, 0) + 1
        return out

    all_groups = groups(devices.topology)
    available_groups = groups(available)
    # A reusable device without topology neither blocks a mask nor counts.
    reusable_groups = groups(d for d in reusable if devices.topology.get(d))

    min_affinity_size = len(nodes)
    found: list[tuple[int, int]] = []
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            mask = sum(1 << n for n in combo)
            in_mask = sum(c for k, c in all_groups.items() if k & mask)
            if in_mask >= request and size < min_affinity_size:
                min_affinity_size = size
            if any(not (k & mask) for k in reusable_groups):
                continue
            count = sum(reusable_groups.values()) + sum(c for k, c in available_groups.items() if k & mask)
            if count >= request:
                found.append((mask, size))
    return [TopologyHint(BitMask(mask), size == min_affinity_size) for mask, size in found]
