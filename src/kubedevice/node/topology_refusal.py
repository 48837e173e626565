"""Why the topology manager refused a pod, in words: each resource's hints and its free devices per NUMA node.

The kubelet's status message for a TopologyAffinityError says only that resources cannot be aligned; the
daemon keeps that message and adds this detail, taken when the pod was refused (the hints the policy
could not merge, and the free devices they came from), so a user can see which node lacked what.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kubedevice.manager import DeviceManager, Pod
from kubedevice.manager.topology_hints import pod_device_requests
from kubedevice.topology import AdmitResult, TopologyHint, TopologyManager

#: Hints shown per resource; an 8-node machine can give 255, which no line should carry.
_HINTS_SHOWN = 8


def refusal_detail(topology: TopologyManager, manager: DeviceManager, pod: Pod, result: AdmitResult) -> str:
    """`single-numa-node policy, container "main": example.com/gpu needs 3, hints [{0,1} preferred], free
    per NUMA node [node0 2, node1 2]`; one such part per resource, joined by "; "."""
    if result.container:
        where = f'container "{result.container}"'
        requests = next(
            (c.limits for c in [*pod.init_containers, *pod.containers] if c.name == result.container), {}
        )
    else:
        where = "pod scope"
        requests = pod_device_requests(pod)
    numa_nodes = sorted(topology.numa_info.nodes)
    parts: list[str] = []
    for provider in result.hints:
        for resource, hints in sorted((provider or {}).items()):
            free = _free_per_numa_node(manager, resource, numa_nodes)
            needs = requests.get(resource, 0)
            parts.append(f"{resource} needs {needs}, {_hints_text(hints)}, free per NUMA node [{free}]")
    return f"{topology.policy.name} policy, {where}: " + ("; ".join(parts) or "no resource gave hints")


def _hints_text(hints: Sequence[TopologyHint] | None) -> str:
    if hints is None:
        return "no NUMA preference"
    if not hints:
        return "hints [] (too few free devices)"
    shown = [f"{h.numa_node_affinity}{' preferred' if h.preferred else ''}" for h in hints[:_HINTS_SHOWN]]
    if len(hints) > _HINTS_SHOWN:
        shown.append(f"{len(hints) - _HINTS_SHOWN} more")
    return f"hints [{', '.join(shown)}]"


def _free_per_numa_node(manager: DeviceManager, resource: str, numa_nodes: Sequence[int]) -> str:
    """`node0 1, node1 0`: healthy devices no container holds, by the NUMA nodes the plugin reports."""
    healthy = manager.get_allocatable_devices().get(resource, {})
    held: set[str] = set()
    for uid in manager.pod_uids():
        for name in manager.container_names(uid):
            held.update((manager.get_devices(uid, name) or {}).get(resource, {}))
    counts: Counter[tuple[int, ...]] = Counter({(n,): 0 for n in numa_nodes})
    counts.update(tuple(sorted(nodes)) for device, nodes in healthy.items() if device not in held)
    return ", ".join(
        f"{'node' + '+'.join(map(str, nodes)) if nodes else 'no NUMA node'} {count}"
        for nodes, count in sorted(counts.items())
    )
