"""Check "topology": what the kubelet's topology manager would make of the plugin's NUMA reporting.

Warnings, not failures: a kubelet accepts all of it, but NUMA-aware nodes then align devices badly.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio

from kubedevice.api.constants import HEALTHY
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.conformance.checks import TOPOLOGY
from kubedevice.conformance.report import CheckResult, Findings, skipped
from kubedevice.wording import counted

#: Device IDs named in one finding before "and N more".
_NAMED = 5


def _named(ids: Sequence[str]) -> str:
    shown = ", ".join(sorted(ids)[:_NAMED])
    return shown + (f" and {len(ids) - _NAMED} more" if len(ids) > _NAMED else "")


def _nodes(device: dp.Device) -> tuple[int, ...]:
    return tuple(n.ID for n in device.topology.nodes) if device.HasField("topology") else ()


async def topology_check(
    stub: dp_grpc.DevicePluginAsyncStub,
    options: dp.DevicePluginOptions,
    first: dp.ListAndWatchResponse | None,
    machine_nodes: Sequence[int],
    timeout_s: float,
) -> CheckResult:
    """NUMA nodes the machine lacks, devices with and without topology mixed, unaligned preferred picks."""
    findings = Findings(TOPOLOGY)
    if first is None or not first.devices:
        return skipped(TOPOLOGY, "not run: no device list")
    nodes_of = {d.ID: _nodes(d) for d in first.devices}
    with_topology = [d for d, nodes in nodes_of.items() if nodes]
    if not with_topology:
        findings.note(
            "no device reports NUMA nodes: the topology manager sees no preference for this resource"
        )
        return findings.result()
    known = set(machine_nodes)
    unknown = {d: [n for n in nodes if n not in known] for d, nodes in nodes_of.items()}
    unknown = {d: ns for d, ns in unknown.items() if ns}
    if unknown:
        missing = sorted({n for ns in unknown.values() for n in ns})
        nodes = "node" if len(missing) == 1 else "nodes"
        findings.warn(
            f"devices {_named(list(unknown))} report NUMA {nodes} {missing} that this node does not have "
            f"(it has {sorted(known)}): no topology hint can hold them"
        )
    without = [d for d, nodes in nodes_of.items() if not nodes]
    if without:
        findings.warn(
            f"devices {_named(without)} report no NUMA node while the resource's others do: the topology "
            "manager counts them in no NUMA node, so they never help an aligned request"
        )
    await _preferred_alignment(stub, options, first, nodes_of, findings, timeout_s)
    reported = sorted({n for d in with_topology for n in nodes_of[d]})
    on = "NUMA node" if len(reported) == 1 else "NUMA nodes"
    findings.note(
        f"{counted(len(with_topology), 'device')} on {on} {reported}; this node has {sorted(known)}"
    )
    return findings.result()


async def _preferred_alignment(
    stub: dp_grpc.DevicePluginAsyncStub,
    options: dp.DevicePluginOptions,
    first: dp.ListAndWatchResponse,
    nodes_of: dict[str, tuple[int, ...]],
    findings: Findings,
    timeout_s: float,
) -> None:
    """Without a NUMA affinity the kubelet offers every free device: a pick that fits on one node should."""
    if not options.get_preferred_allocation_available:
        return
    healthy = [d.ID for d in first.devices if d.health == HEALTHY]
    per_node: dict[int, int] = {}
    for d in healthy:
        nodes = nodes_of[d]
        if len(nodes) == 1:
            per_node[nodes[0]] = per_node.get(nodes[0], 0) + 1
    size = max(per_node.values(), default=0)
    if size < 2 or len(per_node) < 2:
        return  # no choice between an aligned and an unaligned pick
    request = dp.ContainerPreferredAllocationRequest(available_deviceIDs=healthy, allocation_size=size)
    try:
        response = await stub.GetPreferredAllocation(
            dp.PreferredAllocationRequest(container_requests=[request]), timeout=timeout_s
        )
    except grpc.aio.AioRpcError:
        return  # the preferred-allocation check reports the call itself
    if len(response.container_responses) != 1:
        return
    picked = list(response.container_responses[0].deviceIDs)
    common = set.intersection(*(set(nodes_of.get(d, ())) for d in picked)) if picked else set()
    if picked and not common:
        findings.warn(
            f"the preferred allocation of {size} from all {len(healthy)} healthy devices spans NUMA nodes "
            f"({_named(picked)}) although {size} devices share one node: under the topology manager's "
            "policy none, pods get unaligned devices"
        )
