"""The exporter's refresh and collector against a real PodResources server over a unix socket.

The server is a small in-process PodResourcesLister whose answers and failures the test sets: it refuses,
rate-limits, vanishes, and comes back; the exporter keeps serving its last good data with each error counted.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.checkpoint import CheckpointData, PodDevicesEntry, encode
from kubedevice.exporter.checkpoint_probe import CheckpointProbe
from kubedevice.exporter.collector import SnapshotCollector
from kubedevice.exporter.refresh import Refresher
from kubedevice.inventory import PodResourcesReader
from kubedevice.node.podresources import RATE_LIMIT_MESSAGE
from tests.prometheus_text import Samples, held_devices, parse_samples, sample_value
from tests.waiting import short_tempdir

GPU = "example.com/gpu"


def _device(device: str, numa: int | None, resource: str = GPU) -> pr.ContainerDevices:
    topology = pr.TopologyInfo(nodes=[pr.NUMANode(ID=numa)]) if numa is not None else None
    return pr.ContainerDevices(resource_name=resource, device_ids=[device], topology=topology)


class Lister(pr_grpc.PodResourcesListerServicer):
    """Answers what `pods` and `allocatable` say, or fails with `abort` when it is set."""

    def __init__(self) -> None:
        self.pods: list[pr.PodResources] = []
        self.allocatable: list[pr.ContainerDevices] = []
        self.abort: tuple[grpc.StatusCode, str] | None = None
        #: Set: GetAllocatableResources alone fails so (a kubelet before 1.21 says UNIMPLEMENTED).
        self.allocatable_abort: tuple[grpc.StatusCode, str] | None = None

    async def List(self, request: object, context: grpc.aio.ServicerContext[object, object]) -> object:
        if self.abort is not None:
            await context.abort(*self.abort)
        return pr.ListPodResourcesResponse(pod_resources=self.pods)

    async def GetAllocatableResources(
        self, request: object, context: grpc.aio.ServicerContext[object, object]
    ) -> object:
        for abort in (self.abort, self.allocatable_abort):
            if abort is not None:
                await context.abort(*abort)
        return pr.AllocatableResourcesResponse(devices=self.allocatable)


class Bench:
    """A server on a unix socket, a checkpoint path, and the exporter's refresher and collector on them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "kubelet.sock"
        self.checkpoint = root / "kubelet_internal_checkpoint"
        self.lister = Lister()
        self.server: grpc.aio.Server | None = None
        self.refresher = Refresher(
            PodResourcesReader(str(self.socket)), CheckpointProbe(str(self.checkpoint))
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SnapshotCollector(lambda: self.refresher.snapshot))

    async def start_server(self) -> None:
        self.server = grpc.aio.server()
        pr_grpc.add_PodResourcesListerServicer_to_server(self.lister, self.server)
        self.server.add_insecure_port(f"unix://{self.socket}")
        await self.server.start()

    async def stop_server(self) -> None:
        assert self.server is not None
        await self.server.stop(None)
        self.server = None

    def samples(self) -> Samples:
        return parse_samples(generate_latest(self.registry).decode())

    def value(self, name: str, **labels: str) -> float | None:
        return sample_value(self.samples(), name, **labels)

    def errors(self, kind: str) -> float | None:
        return self.value("kubedevice_exporter_errors_total", kind=kind)

    def held(self) -> set[tuple[str, ...]]:
        return held_devices(self.samples())


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    root = short_tempdir("kd-exp-")
    b = Bench(root)
    await b.start_server()
    try:
        yield b
    finally:
        if b.server is not None:
            await b.stop_server()
        shutil.rmtree(root, ignore_errors=True)


def _trainer() -> pr.PodResources:
    return pr.PodResources(
        name="trainer",
        namespace="ml",
        containers=[
            pr.ContainerResources(name="sidecar", devices=[_device("gpu-0", 0)]),
            # The kubelet sends a device on two NUMA nodes as two entries; it is one device.
            pr.ContainerResources(name="train", devices=[_device("gpu-2", 0), _device("gpu-2", 1)]),
            pr.ContainerResources(name="idle"),
        ],
    )


def _node(b: Bench) -> None:
    b.lister.pods = [
        _trainer(),
        pr.PodResources(
            name="web",
            namespace="default",
            containers=[
                pr.ContainerResources(
                    name="main", devices=[_device("gpu-3", 1), _device("nic-0", None, "example.com/nic")]
                )
            ],
        ),
    ]
    # gpu-3 is held but not allocatable: unhealthy, or its plugin is gone.
    b.lister.allocatable = [
        _device("gpu-0", 0),
        _device("gpu-1", 0),
        _device("gpu-2", 0),
        _device("gpu-2", 1),
    ]
    b.lister.allocatable.append(_device("nic-0", None, "example.com/nic"))


async def test_series_per_held_device_and_per_resource(bench: Bench) -> None:
    _node(bench)
    await bench.refresher.refresh()
    assert bench.held() == {
        ("ml", "trainer", "sidecar", GPU, "gpu-0", "0"),
        ("ml", "trainer", "train", GPU, "gpu-2", "0,1"),
        ("default", "web", "main", GPU, "gpu-3", "1"),
        ("default", "web", "main", "example.com/nic", "nic-0", ""),
    }
    assert bench.value("kubedevice_allocatable_devices", resource=GPU) == 3
    assert bench.value("kubedevice_allocated_devices", resource=GPU) == 3
    assert bench.value("kubedevice_free_devices", resource=GPU) == 1
    assert bench.value("kubedevice_allocated_unallocatable_devices", resource=GPU) == 1
    assert bench.value("kubedevice_allocated_devices_by_numa_node", resource=GPU, numa_node="0") == 2
    assert bench.value("kubedevice_allocated_devices_by_numa_node", resource=GPU, numa_node="1") == 2
    assert (
        bench.value("kubedevice_allocated_devices_by_numa_node", resource="example.com/nic", numa_node="")
        == 1
    )
    assert bench.value("kubedevice_allocatable_device_info", resource=GPU, device="gpu-1", numa_node="0") == 1
    assert bench.value("kubedevice_exporter_podresources_up") == 1
    assert bench.value("kubedevice_exporter_last_success_timestamp_seconds") is not None
    # No checkpoint file: told, not an error of PodResources.
    assert bench.value("kubedevice_checkpoint_state", state="missing") == 1
    assert bench.value("kubedevice_checkpoint_verified") == 0


async def test_rate_limited_refused_and_vanished_keep_the_last_data(bench: Bench) -> None:
    _node(bench)
    await bench.refresher.refresh()
    good = bench.held()
    last_success = bench.value("kubedevice_exporter_last_success_timestamp_seconds")

    bench.lister.abort = (grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMIT_MESSAGE)
    await bench.refresher.refresh()
    assert bench.errors("rate_limited") == 1
    assert bench.held() == good
    assert bench.value("kubedevice_exporter_podresources_up") == 0
    assert bench.value("kubedevice_exporter_last_success_timestamp_seconds") == last_success
    # Rate-limited: the next refresh waits longer, up to a bound.
    assert bench.refresher.period == 2 * bench.refresher.interval

    bench.lister.abort = None
    await bench.stop_server()
    # The server is gone; a socket file nobody listens on stays behind: refused.
    with socket.socket(socket.AF_UNIX) as dead:
        if bench.socket.exists():
            bench.socket.unlink()
        dead.bind(str(bench.socket))
        await bench.refresher.refresh()
        assert bench.errors("refused") == 1
    os.unlink(bench.socket)
    await bench.refresher.refresh()
    assert bench.errors("missing") == 1
    assert bench.held() == good
    assert bench.value("kubedevice_exporter_refreshes_total") == 4

    bench.lister.pods = bench.lister.pods[:1]
    await bench.start_server()
    await bench.refresher.refresh()
    assert bench.value("kubedevice_exporter_podresources_up") == 1
    assert bench.refresher.period == bench.refresher.interval
    assert {h[1] for h in bench.held()} == {"trainer"}
    assert bench.errors("rate_limited") == 1 and bench.errors("refused") == 1 and bench.errors("missing") == 1


async def test_other_errors_are_counted_by_kind(bench: Bench) -> None:
    bench.lister.abort = (grpc.StatusCode.UNIMPLEMENTED, "unknown service v1.PodResourcesLister")
    await bench.refresher.refresh()
    assert bench.errors("error") == 1
    # Nothing was ever read: no device series at all, rather than zeros that would look like an empty node.
    assert "kubedevice_pod_device_info" not in bench.samples()
    assert bench.value("kubedevice_exporter_last_success_timestamp_seconds") is None


async def test_a_kubelet_without_get_allocatable_still_gives_what_is_held(bench: Bench) -> None:
    _node(bench)
    bench.lister.allocatable_abort = (grpc.StatusCode.UNIMPLEMENTED, "unknown method GetAllocatableResources")
    await bench.refresher.refresh()
    assert {h[4] for h in bench.held()} == {"gpu-0", "gpu-2", "gpu-3", "nic-0"}
    assert bench.value("kubedevice_allocated_devices", resource=GPU) == 3
    assert bench.value("kubedevice_allocated_devices_by_numa_node", resource=GPU, numa_node="1") == 2
    # What is free cannot be known: no series rather than a wrong 0.
    samples = bench.samples()
    for name in (
        "kubedevice_allocatable_device_info",
        "kubedevice_allocatable_devices",
        "kubedevice_free_devices",
    ):
        assert name not in samples
    assert bench.value("kubedevice_exporter_podresources_up") == 1
    assert all(v == 0 for _, v in samples["kubedevice_exporter_errors_total"])

    # Any other failure of that call is a failed read, as for List.
    bench.lister.allocatable_abort = (grpc.StatusCode.INTERNAL, "boom")
    await bench.refresher.refresh()
    assert bench.errors("error") == 1


def _write_checkpoint(path: Path, entries: list[PodDevicesEntry]) -> None:
    path.write_bytes(encode(CheckpointData(entries, {GPU: ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]})))


async def test_checkpoint_entries_age_and_stale_allocations(bench: Bench) -> None:
    _node(bench)
    _write_checkpoint(
        bench.checkpoint,
        [
            PodDevicesEntry("uid-trainer", "sidecar", GPU, {0: ["gpu-0"]}, b""),
            # A plain init container: checkpointed, not listed; its device went on to `train`.
            PodDevicesEntry("uid-trainer", "setup", GPU, {0: ["gpu-2"]}, b""),
            PodDevicesEntry("uid-gone", "main", GPU, {0: ["gpu-1"], 1: ["gpu-4"]}, b""),
        ],
    )
    os.utime(bench.checkpoint, (1_700_000_000, 1_700_000_000))
    await bench.refresher.refresh()
    assert bench.value("kubedevice_checkpoint_verified") == 1
    assert bench.value("kubedevice_checkpoint_state", state="verified") == 1
    assert bench.value("kubedevice_checkpoint_entries") == 3
    assert bench.value("kubedevice_checkpoint_modified_timestamp_seconds") == 1_700_000_000
    age = bench.value("kubedevice_checkpoint_age_seconds")
    assert age is not None and age > 0
    # The trainer holds gpu-0 in PodResources, so its init container's entry is not stale; uid-gone is.
    assert bench.value("kubedevice_checkpoint_stale_devices", resource=GPU) == 2
    assert bench.value("kubedevice_checkpoint_stale_devices", resource="example.com/nic") == 0
    stale = {
        (labels["pod_uid"], labels["device"])
        for labels, _ in bench.samples()["kubedevice_checkpoint_stale_device_info"]
    }
    assert stale == {("uid-gone", "gpu-1"), ("uid-gone", "gpu-4")}


async def test_corrupted_checkpoint_does_not_verify(bench: Bench) -> None:
    _node(bench)
    _write_checkpoint(bench.checkpoint, [PodDevicesEntry("uid-gone", "main", GPU, {0: ["gpu-1"]}, b"")])
    raw = bench.checkpoint.read_bytes()
    bench.checkpoint.write_bytes(raw.replace(b"gpu-1", b"gpu-9"))
    await bench.refresher.refresh()
    assert bench.value("kubedevice_checkpoint_verified") == 0
    assert bench.value("kubedevice_checkpoint_state", state="corrupt") == 1
    assert bench.value("kubedevice_checkpoint_entries") == 1
    # A corrupt file is not trusted for allocations: the kubelet would not restore it either.
    assert "kubedevice_checkpoint_stale_devices" not in bench.samples()

    bench.checkpoint.write_text("{not json")
    await bench.refresher.refresh()
    assert bench.value("kubedevice_checkpoint_state", state="malformed") == 1
    assert bench.value("kubedevice_checkpoint_entries") is None

    bench.checkpoint.unlink()
    bench.checkpoint.mkdir()
    await bench.refresher.refresh()
    assert bench.value("kubedevice_checkpoint_state", state="unreadable") == 1
    assert bench.value("kubedevice_exporter_podresources_up") == 1
