"""Topology hints: the device manager as the topology manager's hint provider (the kubelet's
`topology_hints.go`: `GetTopologyHints` and `generateDeviceTopologyHints`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

from kubedevice.manager.allocator import Allocator
from kubedevice.manager.devices import ResourceDevices
from kubedevice.manager.state import ManagerState
from kubedevice.manager.types import Container, Pod, TopologyHint


class TopologyHints:
    """Per device-plugin resource of a container: which NUMA node sets could hold its devices."""

    def __init__(self, state: ManagerState, allocator: Allocator, numa_nodes: Iterable[int] | None) -> None:
        self._state = state
        self._allocator = allocator
        self._numa_nodes = sorted(set(numa_nodes)) if numa_nodes is not None else None

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint] | None]:
        """Per device-plugin resource of the container: None (no preference) or the hints (SPEC §5.5)."""
        self._allocator.update_allocated_devices()
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource in sorted(container.limits):
            requested = container.limits[resource]
            if not self._state.is_device_plugin_resource(resource):
                continue
            devices = self._state.devices.get(resource)
            if devices is None or not devices.has_topology:
                hints[resource] = None
                continue
            allocated = self._state.pod_devices.container_devices(pod.uid, container.name, resource)
            if allocated:
                if len(allocated) != requested:
                    hints[resource] = []
                else:
                    hints[resource] = generate_topology_hints(
                        self._numa_nodes_for(devices), devices, allocated, set(), requested
                    )
                continue
            available = self._allocator.available(resource)
            reusable = self._allocator.reuse.get(pod.uid, {}).get(resource, set())
            if len(available | reusable) < requested:
                hints[resource] = []
                continue
            hints[resource] = generate_topology_hints(
                self._numa_nodes_for(devices), devices, available, reusable, requested
            )
        return hints

    def _numa_nodes_for(self, devices: ResourceDevices) -> list[int]:
        if self._numa_nodes is not None:
            return self._numa_nodes
        nodes: set[int] = set()
        for resource_devices in self._state.devices.values():
            for node_ids in resource_devices.topology.values():
                nodes.update(node_ids)
        return sorted(nodes)


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
