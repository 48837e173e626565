"""The topology manager over a real device manager and plugin: hints, merge, stored affinity, allocation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kubedevice.manager import Container, DeviceManager, Pod
from kubedevice.node.topology_refusal import refusal_detail
from kubedevice.topology import TopologyConfig, TopologyManager, new_manager, synthetic_topology
from tests.integration.fakeplugin import RESOURCE as R
from tests.integration.fakeplugin import FakePlugin, device, held, one, registered, running_manager, serving
from tests.unit.topology_notation import h, hs

#: Vector 17's devices: Dev1 and Dev3 on node 0, Dev2 and Dev4 on node 1.
DEVICES = [
    device("Dev1", numa=[0]),
    device("Dev2", numa=[1]),
    device("Dev3", numa=[0]),
    device("Dev4", numa=[1]),
]


@asynccontextmanager
async def aligned_node(
    root: Path, policy: str, scope: str = "container"
) -> AsyncIterator[tuple[TopologyManager, DeviceManager]]:
    tm = new_manager(synthetic_topology(2), TopologyConfig(policy, scope), CollectorRegistry())
    async with running_manager(root, affinity=tm, numa_nodes=[0, 1]) as m:
        tm.add_hint_provider(m)
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, DEVICES)
        async with serving(plugin):
            await registered(m, plugin)
            yield tm, m


@pytest.mark.parametrize(
    ("policy", "admitted"), [("best-effort", True), ("restricted", False), ("single-numa-node", False)]
)
async def test_vector_17_one_free_device_per_node(root: Path, policy: str, admitted: bool) -> None:
    async with aligned_node(root, policy) as (tm, m):
        # Dev1 and Dev2 are held (allocated without a hint: the smallest IDs), one on each node.
        first, c = one("pod-a", 2)
        await m.allocate(first, c)
        assert held(m, "pod-a") == {"Dev1", "Dev2"}
        pod, c = one("pod-c", 2)
        assert m.get_topology_hints(pod, c) == {R: hs("{0,1}F")}
        result = await tm.admit(pod)
        assert result.admit is admitted
        if admitted:
            assert held(m, "pod-c") == {"Dev3", "Dev4"} and tm.get_affinity("pod-c", "c") == h("{0,1}F")
        else:
            assert result.reason == "TopologyAffinityError" and m.get_devices("pod-c", "c") is None


async def test_the_stored_affinity_picks_the_node(root: Path) -> None:
    async with aligned_node(root, "single-numa-node") as (tm, m):
        pod, c = one("pod-a", 2)
        assert (await tm.admit(pod)).admit
        [node] = {n for d in held(m, "pod-a") for n in m.device_topology(R)[d]}
        assert tm.get_affinity("pod-a", "c") == h(f"{{{node}}}T")
        # Already holding its devices, the container gets the same hints again (a restart's re-admission).
        assert m.get_topology_hints(pod, c) == {R: hs(f"{{{node}}}T", "{0,1}F")}


async def test_pod_scope_hints_cover_the_pod_level_request_and_its_held_devices(root: Path) -> None:
    async with aligned_node(root, "single-numa-node", "pod") as (tm, m):
        pod = Pod(uid="pod-p", containers=[Container("a", {R: 1}), Container("b", {R: 1})])
        assert m.get_pod_topology_hints(pod) == {R: hs("{0}T", "{1}T", "{0,1}F")}
        assert (await tm.admit(pod)).admit
        devices = held(m, "pod-p", "a") | held(m, "pod-p", "b")
        nodes = {n for d in devices for n in m.device_topology(R)[d]}
        assert len(devices) == 2 and len(nodes) == 1
        assert tm.get_affinity("pod-p", "a") == tm.get_affinity("pod-p", "b") == h(f"{{{nodes.pop()}}}T")
        # The pod's devices, over all its containers, regenerate the pod's hints.
        again = m.get_pod_topology_hints(pod)[R]
        assert again is not None and [x for x in again if x.preferred] == [tm.get_affinity("pod-p", "a")]
        # A pod whose containers hold a different count than it asks for cannot be satisfied.
        bigger = Pod(uid="pod-p", containers=[Container("a", {R: 1}), Container("b", {R: 2})])
        assert m.get_pod_topology_hints(bigger) == {R: []}


async def test_a_refusal_is_told_with_hints_and_free_devices_per_node(root: Path) -> None:
    async with aligned_node(root, "single-numa-node", "pod") as (tm, m):
        first, _ = one("pod-a", 1)
        assert (await tm.admit(first)).admit  # one device of node 0 or 1 is held now
        pod = Pod(uid="pod-p", containers=[Container("a", {R: 2}), Container("b", {R: 2})])
        result = await tm.admit(pod)
        assert result.reason == "TopologyAffinityError"
        # Four wanted, three free: no mask can hold them, so the pod scope's hints are empty.
        [node] = {n for d in held(m, "pod-a") for n in m.device_topology(R)[d]}
        free = "node0 1, node1 2" if node == 0 else "node0 2, node1 1"
        assert refusal_detail(tm, m, pod, result) == (
            f"single-numa-node policy, pod scope: {R} needs 4, hints [] (too few free devices), "
            f"free per NUMA node [{free}]"
        )
