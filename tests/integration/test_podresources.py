"""PodResources v1 over a real unix socket: an in-process node daemon, a real `kubedevice plugin fake`."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.manager import DeviceManager
from kubedevice.node.daemon import NodeConfig, NodeDaemon
from kubedevice.node.podresources import PodResourcesMetrics, PodResourcesServicer, container_devices
from kubedevice.ratelimit import TokenBucket
from tests.node_helpers import CLI, TRAINER_POD, async_wait_for, short_tmpdir

GPU = "example.com/gpu"


@pytest.fixture
async def daemon() -> AsyncIterator[NodeDaemon]:
    root = short_tmpdir()
    node = NodeDaemon(NodeConfig(root_dir=root, scan_interval=0.05))
    await node.start()
    plugin = await asyncio.create_subprocess_exec(
        *CLI,
        "plugin",
        "fake",
        "--resource",
        GPU,
        "--devices",
        "4",
        "--numa-nodes",
        "2",
        "--plugin-dir",
        str(node.paths.plugin_dir),
        "--poll-interval",
        "0.1",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield node
    finally:
        plugin.kill()
        await plugin.wait()
        await node.stop()
        shutil.rmtree(root, ignore_errors=True)


def _capacity(node: NodeDaemon) -> int:
    assert node.manager is not None
    return node.manager.get_capacity()[0].get(GPU, 0)


async def test_list_get_and_allocatable(daemon: NodeDaemon) -> None:
    await async_wait_for(lambda: _capacity(daemon) == 4, "the fake plugin to register 4 devices")
    (daemon.paths.manifests / "trainer.yaml").write_text(TRAINER_POD)
    await async_wait_for(lambda: any(r.phase == "Running" for r in daemon.pods), "the pod to be admitted")
    sock = daemon.paths.pod_resources_socket
    assert stat.S_IMODE(os.stat(sock).st_mode) & 0o007 == 0  # not world-accessible
    async with grpc.aio.insecure_channel(f"unix://{sock}") as channel:
        stub = pr_grpc.PodResourcesListerStub(channel)
        listed = await stub.List(pr.ListPodResourcesRequest())
        [pod] = listed.pod_resources
        assert (pod.namespace, pod.name) == ("ml", "trainer")
        # The sidecar comes first, then the app containers; a regular init container is not listed.
        assert [c.name for c in pod.containers] == ["sidecar", "train", "idle"]
        by_name = {c.name: c for c in pod.containers}
        assert len(by_name["sidecar"].devices) == 1 and len(by_name["train"].devices) == 2
        assert not by_name["idle"].devices
        for d in [*by_name["sidecar"].devices, *by_name["train"].devices]:
            assert d.resource_name == GPU and len(d.device_ids) == 1 and len(d.topology.nodes) == 1
        held = {d.device_ids[0] for c in pod.containers for d in c.devices}
        assert len(held) == 3  # the init container's device was reused by an app container

        got = await stub.Get(pr.GetPodResourcesRequest(pod_name="trainer", pod_namespace="ml"))
        assert got.pod_resources == pod

        allocatable = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest())
        assert sorted(d.device_ids[0] for d in allocatable.devices) == [f"fake-{i}" for i in range(4)]
        assert {d.topology.nodes[0].ID for d in allocatable.devices} == {0, 1}

        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Get(pr.GetPodResourcesRequest(pod_name="nope", pod_namespace="ml"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert err.value.details() == "pod nope in namespace ml not found"

    metrics = generate_latest(daemon.registry).decode()
    assert 'kubelet_pod_resources_endpoint_requests_total{server_api_version="v1"} 4.0' in metrics
    assert 'kubelet_pod_resources_endpoint_requests_get{server_api_version="v1"} 2.0' in metrics
    assert 'kubelet_pod_resources_endpoint_errors_get{server_api_version="v1"} 1.0' in metrics
    assert 'kubelet_pod_resources_endpoint_requests_list{server_api_version="v1"} 1.0' in metrics
    assert 'kubedevice_node_pods{phase="Running"} 1.0' in metrics
    assert "kubedevice_node_admissions_total 1.0" in metrics
    assert "kubelet_device_plugin_registration_total" in metrics  # the manager's, on the same registry


async def test_rate_limit_answers_resource_exhausted() -> None:
    root = short_tmpdir()
    manager = DeviceManager(root / "device-plugins")
    await manager.start()
    registry = CollectorRegistry()
    metrics = PodResourcesMetrics(registry)
    frozen = TokenBucket(qps=100, burst=10, clock=lambda: 0.0)  # no refill: exactly the burst passes
    server = grpc.aio.server()
    pr_grpc.add_PodResourcesListerServicer_to_server(
        PodResourcesServicer(manager, list, metrics, frozen), server
    )
    sock = root / "pr.sock"
    server.add_insecure_port(f"unix://{sock}")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"unix://{sock}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            for _ in range(10):
                await stub.List(pr.ListPodResourcesRequest())
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetAllocatableResources(pr.AllocatableResourcesRequest())
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert err.value.details() == "rejected by rate limit"
        assert metrics.value("kubelet_pod_resources_endpoint_requests_total") == 10
    finally:
        await server.stop(0)
        await manager.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_one_entry_per_device_per_numa_node() -> None:
    entries = container_devices({GPU: {"a": (0, 1), "b": ()}})
    assert [(e.device_ids[0], e.HasField("topology"), [n.ID for n in e.topology.nodes]) for e in entries] == [
        ("a", True, [0]),
        ("a", True, [1]),
        ("b", False, []),
    ]
    assert container_devices(None) == []
