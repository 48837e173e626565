"""SharedPlugin against the fake kubelet: replicas advertised, health per device, calls mapped back."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.plugin import (
    Allocation,
    ConfigError,
    Device,
    DevicePlugin,
    PluginServer,
    SharedDevices,
    SharedPlugin,
)
from tests.plugin_kubelet import FakeKubelet, Registration, plugin_dir

__all__ = ["plugin_dir"]

RESOURCE = "example.com/gpu"
SHARED = "example.com/gpu.shared"


class Gpus(DevicePlugin):
    """Four GPUs on two NUMA nodes; records what its hooks were given."""

    resource_name = RESOURCE
    poll_interval = 0.02

    def __init__(self) -> None:
        self.current = [Device(f"gpu-{i}", numa_nodes=(i // 2,)) for i in range(4)]
        self.allocated: list[SharedDevices] = []
        self.prestarted: list[SharedDevices] = []

    async def devices(self) -> Sequence[Device]:
        return list(self.current)

    def set_health(self, device_id: str, healthy: bool) -> None:
        self.current = [Device(d.id, healthy, d.numa_nodes) if d.id == device_id else d for d in self.current]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        assert isinstance(devices, SharedDevices)
        self.allocated.append(devices)
        return Allocation(envs={"GPUS": ",".join(f"{d.id}x{devices.replicas_of(d)}" for d in devices)})

    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        assert isinstance(devices, SharedDevices)
        self.prestarted.append(devices)


def _advertised(registration: Registration) -> list[tuple[str, str, list[int]]]:
    return [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in registration.lists[-1].devices]


async def _allocate(registration: Registration, *ids: str) -> dp.ContainerAllocateResponse:
    response = await registration.stub.Allocate(
        dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])
    )
    return response.container_responses[0]


async def _refused(registration: Registration, *ids: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _allocate(registration, *ids)
    return caught.value


async def test_four_devices_times_three_replicas_are_twelve_with_their_topology(plugin_dir: str) -> None:
    shared = SharedPlugin(Gpus(), 3, resource_name=SHARED)
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(shared, plugin_dir):
        registration = await kubelet.wait_registrations(1)
        await kubelet.wait_for(lambda: bool(registration.lists), "the first list")
        assert registration.request.resource_name == SHARED
        # Sharing always offers GetPreferredAllocation (to spread); PreStartContainer is the wrapped plugin's.
        assert registration.options.get_preferred_allocation_available
        assert registration.options.pre_start_required
        assert _advertised(registration) == [
            (f"gpu-{i}::{k}", "Healthy", [i // 2]) for i in range(4) for k in range(3)
        ]


async def test_a_health_flip_turns_all_replicas_of_the_device_in_one_update(plugin_dir: str) -> None:
    gpus = Gpus()
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(SharedPlugin(gpus, 3), plugin_dir):
        registration = await kubelet.wait_registrations(1)
        healthy = {f"gpu-{i}::{k}": "Healthy" for i in range(4) for k in range(3)}
        await kubelet.wait_health(healthy)
        gpus.set_health("gpu-2", False)
        sick = healthy | {f"gpu-2::{k}": "Unhealthy" for k in range(3)}
        await kubelet.wait_health(sick)
        gpus.set_health("gpu-2", True)
        await kubelet.wait_health(healthy)
        # Exactly three messages: never one where only some replicas of gpu-2 had turned.
        assert [{d.ID: d.health for d in m.devices} for m in registration.lists] == [healthy, sick, healthy]

        gpus.set_health("gpu-2", False)
        await kubelet.wait_health(sick)
        unhealthy = await _refused(registration, "gpu-1::0", "gpu-2::1")
        assert unhealthy.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert unhealthy.details() == "Allocate: unhealthy example.com/gpu devices: gpu-2::1"
        assert not gpus.allocated


async def test_allocate_and_pre_start_see_physical_devices_once_with_their_replica_counts(
    plugin_dir: str,
) -> None:
    gpus = Gpus()
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(SharedPlugin(gpus, 3), plugin_dir):
        registration = await kubelet.wait_registrations(1)
        response = await _allocate(registration, "gpu-3::2", "gpu-1::0", "gpu-3::0")
        assert dict(response.envs) == {"GPUS": "gpu-3x2,gpu-1x1"}
        [given] = gpus.allocated
        assert list(given) == [Device("gpu-3", numa_nodes=(1,)), Device("gpu-1", numa_nodes=(0,))]
        assert dict(given.replicas) == {"gpu-3": 2, "gpu-1": 1}
        assert (given.replicas_of("gpu-3"), given.replicas_of(given[1]), given.replicas_of("gpu-0")) == (
            2,
            1,
            0,
        )
        assert given.total == 3

        await registration.stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["gpu-0::1"]))
        [prestarted] = gpus.prestarted
        assert list(prestarted) == [Device("gpu-0", numa_nodes=(0,))] and prestarted.replicas_of("gpu-0") == 1

        unknown = await _refused(registration, "gpu-0::3", "gpu-9::0")
        assert unknown.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert unknown.details() == "Allocate: unknown example.com/gpu devices: gpu-0::3, gpu-9::0"


async def test_more_than_one_replica_per_container_is_refused_when_configured(plugin_dir: str) -> None:
    gpus = Gpus()
    shared = SharedPlugin(gpus, 3, resource_name=SHARED, refuse_multiple=True)
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(shared, plugin_dir) as server:
        registration = await kubelet.wait_registrations(1)
        for ids in (["gpu-0::0", "gpu-0::1"], ["gpu-0::0", "gpu-1::0"]):
            refused = await _refused(registration, *ids)
            assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.details() == (
                f"allocate: request for 2 {SHARED} replicas ({', '.join(ids)}) refused: a container may get "
                f"at most 1 replica of a shared device — ask for {SHARED}: 1"
            )
        assert not gpus.allocated
        assert dict((await _allocate(registration, "gpu-0::1")).envs) == {"GPUS": "gpu-0x1"}
        assert server.metrics.value("kubedevice_plugin_allocations_total", result="invalid") == 2


async def test_preferred_allocation_spreads_over_the_least_used_devices(plugin_dir: str) -> None:
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(SharedPlugin(Gpus(), 3), plugin_dir):
        registration = await kubelet.wait_registrations(1)
        every = [f"gpu-{i}::{k}" for i in range(4) for k in range(3)]
        # Held by other containers: two replicas of gpu-0, one of gpu-1.
        available = [r for r in every if r not in ("gpu-0::0", "gpu-0::1", "gpu-1::0")]

        async def preferred(size: int, must_include: Sequence[str] = ()) -> list[str]:
            request = dp.PreferredAllocationRequest(
                container_requests=[
                    dp.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available,
                        must_include_deviceIDs=must_include,
                        allocation_size=size,
                    )
                ]
            )
            response = await registration.stub.GetPreferredAllocation(request)
            return list(response.container_responses[0].deviceIDs)

        assert await preferred(1) == ["gpu-2::0"]
        # Further replicas of one container stay on the NUMA node of its first (gpu-2 and gpu-3: node 1).
        assert await preferred(3) == ["gpu-2::0", "gpu-3::0", "gpu-2::1"]
        assert await preferred(5) == ["gpu-2::0", "gpu-3::0", "gpu-2::1", "gpu-3::1", "gpu-2::2"]
        # must_include comes first, counts as use of its device and sets the NUMA nodes to stay on.
        assert await preferred(2, ["gpu-2::2"]) == ["gpu-2::2", "gpu-3::0"]
        # Node 0 (gpu-0, gpu-1) is busier than node 1, but must_include put the container there.
        assert await preferred(2, ["gpu-1::2"]) == ["gpu-1::2", "gpu-0::2"]
        assert await preferred(3, ["gpu-0::2", "gpu-3::1"]) == ["gpu-0::2", "gpu-3::1", "gpu-2::0"]
        assert await preferred(9) == [
            *("gpu-2::0", "gpu-3::0", "gpu-2::1", "gpu-3::1", "gpu-2::2", "gpu-3::2"),
            *("gpu-1::1", "gpu-0::2", "gpu-1::2"),
        ]


class NoSource(DevicePlugin):
    resource_name = RESOURCE


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SharedPlugin(Gpus(), 0), "replicas must be a whole number >= 1, got 0"),
        (lambda: SharedPlugin(Gpus(), -3), "replicas must be a whole number >= 1, got -3"),
        (lambda: SharedPlugin(Gpus(), True), "replicas must be a whole number >= 1, got True"),
        (lambda: SharedPlugin(Gpus(), "3"), "replicas must be a whole number >= 1, got '3'"),
        (lambda: SharedPlugin(Gpus(), 2, resource_name="gpu.shared"), "'gpu.shared'"),
        (lambda: SharedPlugin(NoSource(), 2), "NoSource must override devices() or watch_devices()"),
    ],
)
def test_bad_sharing_configuration_is_refused_up_front(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make()
    assert message in str(caught.value)


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_python(marker: str) -> str:
    for block in README.read_text(encoding="utf-8").split("```python")[1:]:
        code = block.split("```")[0]
        if marker in code:
            return textwrap.dedent(code)
    raise AssertionError(f"README.md has no python block with {marker!r}")


async def test_the_readme_sharing_snippet_runs_as_written(plugin_dir: str) -> None:
    # The SDK snippet defines Widgets and serves it; the sharing snippet serves it shared instead.
    plugin = _readme_python("serve(Widgets())").replace("serve(Widgets())", "")
    script = Path(plugin_dir) / "shared_widgets.py"
    script.write_text(plugin + _readme_python("SharedPlugin(Widgets()"))
    async with FakeKubelet(plugin_dir) as kubelet:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            env={**os.environ, "KUBEDEVICE_PLUGIN_DIR": plugin_dir},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            registration = await kubelet.wait_registrations(1)
            await kubelet.wait_for(lambda: bool(registration.lists), "the first list")
            assert registration.request.resource_name == "example.com/widget.shared"
            assert [(d.ID, d.health) for d in registration.lists[-1].devices] == [
                *((f"w0::{k}", "Healthy") for k in range(4)),
                *((f"w1::{k}", "Unhealthy") for k in range(4)),
            ]
            refused = await _refused(registration, "w0::0", "w0::1")
            assert "request for 2 example.com/widget.shared replicas (w0::0, w0::1) refused" in str(
                refused.details()
            )
        finally:
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
