"""PluginServer against the fake kubelet: registration, options, ListAndWatch, Allocate and its errors."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence

import grpc
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.plugin import (
    Allocation,
    ConfigError,
    Device,
    DevicePlugin,
    DeviceSpec,
    EventKind,
    InvalidRequest,
    LifecycleEvent,
    Mount,
    PluginServer,
)
from tests.plugin_kubelet import FakeKubelet, plugin_dir, wait_until

__all__ = ["plugin_dir"]

RESOURCE = "example.com/widget"


class PolledPlugin(DevicePlugin):
    resource_name = RESOURCE
    poll_interval = 0.02

    def __init__(self) -> None:
        self.current = [Device("w-0"), Device("w-1", numa_nodes=(1,))]

    async def devices(self) -> Sequence[Device]:
        return list(self.current)

    def set_health(self, device_id: str, healthy: bool) -> None:
        self.current = [Device(d.id, healthy, d.numa_nodes) if d.id == device_id else d for d in self.current]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        ids = ",".join(d.id for d in devices)
        if "w-1" in ids and "w-0" in ids:
            raise RuntimeError("w-0 and w-1 share a power rail")
        if ids == "w-1":
            raise InvalidRequest("w-1 is reserved for system pods")
        return Allocation(
            envs={"WIDGETS": ids},
            mounts=[Mount("/var/widget", "/srv/widget", read_only=True)],
            devices=[DeviceSpec(f"/dev/{d.id}", f"/dev/{d.id}", "rw") for d in devices],
            annotations={"example.com/widgets": ids},
            cdi_devices=[f"{RESOURCE}={d.id}" for d in devices],
        )


class PushedPlugin(DevicePlugin):
    """Pushes full lists through a queue, as a plugin fed by hardware events would."""

    resource_name = RESOURCE

    def __init__(self) -> None:
        self.lists: asyncio.Queue[list[Device]] = asyncio.Queue()
        self.lists.put_nowait([Device("w-0"), Device("w-1", numa_nodes=(1,))])

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        while True:
            yield await self.lists.get()

    def set_health(self, device_id: str, healthy: bool) -> None:
        self.lists.put_nowait(
            [Device("w-0", healthy if device_id == "w-0" else True), Device("w-1", True, (1,))]
        )

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation(envs={"WIDGETS": ",".join(d.id for d in devices)})


class FullPlugin(PolledPlugin):
    def __init__(self) -> None:
        super().__init__()
        self.prestarted: list[list[str]] = []

    async def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        ids = [d.id for d in must_include] + sorted(d.id for d in available if d not in must_include)
        return ids[:size]

    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        self.prestarted.append([d.id for d in devices])


async def test_registers_only_once_its_socket_answers(plugin_dir: str) -> None:
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(PolledPlugin(), plugin_dir) as server:
        registration = await kubelet.wait_registrations(1)
        assert registration.answered_during_register
        assert registration.request.version == "v1beta1"
        assert registration.request.resource_name == RESOURCE
        # endpoint is a file name relative to the plugin directory, and it is the socket being served
        assert os.path.join(plugin_dir, registration.request.endpoint) == server.socket_path
        assert "/" not in registration.request.endpoint
        assert registration.request.endpoint.startswith(f"example.com_widget-{os.getpid()}-")
        await kubelet.wait_for(lambda: bool(registration.lists), "first list")
        first = registration.lists[0]
        assert [(d.ID, d.health) for d in first.devices] == [("w-0", "Healthy"), ("w-1", "Healthy")]
        assert not first.devices[0].HasField("topology")
        assert [n.ID for n in first.devices[1].topology.nodes] == [1]
    assert server.socket_path is None
    assert not any(name.endswith(".sock") and "widget" in name for name in os.listdir(plugin_dir))


async def test_waits_for_kubelet_socket_before_registering(plugin_dir: str) -> None:
    events: list[LifecycleEvent] = []
    async with PluginServer(PolledPlugin(), plugin_dir, on_event=events.append) as server:
        await wait_until(lambda: any(e.kind == EventKind.DEVICES for e in events), what="first device list")
        assert server.registrations == 0
        kubelet = FakeKubelet(plugin_dir)
        await kubelet.start()
        try:
            await kubelet.wait_registrations(1)
            await wait_until(lambda: server.registrations == 1, what="Register to return")
            assert [e.kind for e in events if e.kind == EventKind.REGISTERED] == [EventKind.REGISTERED]
        finally:
            await kubelet.stop()


@pytest.mark.parametrize(
    ("plugin_class", "pre_start", "preferred"),
    [(PolledPlugin, False, False), (FullPlugin, True, True)],
)
async def test_options_follow_overridden_hooks(
    plugin_dir: str, plugin_class: type[DevicePlugin], pre_start: bool, preferred: bool
) -> None:
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin_class(), plugin_dir):
        registration = await kubelet.wait_registrations(1)
        for options in (registration.options, registration.request.options):
            assert options.pre_start_required is pre_start
            assert options.get_preferred_allocation_available is preferred


@pytest.mark.parametrize("plugin_class", [PolledPlugin, PushedPlugin])
async def test_health_flips_both_ways_reach_every_stream(
    plugin_dir: str, plugin_class: type[PolledPlugin] | type[PushedPlugin]
) -> None:
    plugin = plugin_class()
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin, plugin_dir):
        registration = await kubelet.wait_registrations(1)
        await kubelet.wait_health({"w-0": "Healthy", "w-1": "Healthy"})
        # A second watcher (say, a second kubelet connection) gets the same updates.
        second: list[dp.ListAndWatchResponse] = []
        stream = registration.stub.ListAndWatch(dp.Empty())

        async def follow() -> None:
            async for message in stream:
                second.append(message)

        follower = asyncio.create_task(follow())
        await wait_until(lambda: len(second) == 1, what="second stream's first list")

        plugin.set_health("w-0", False)
        await kubelet.wait_health({"w-0": "Unhealthy", "w-1": "Healthy"})
        plugin.set_health("w-0", True)
        await kubelet.wait_health({"w-0": "Healthy", "w-1": "Healthy"})
        await wait_until(lambda: len(second) == 3, what="second stream's updates")
        assert [{d.ID: d.health for d in m.devices}["w-0"] for m in second] == [
            "Healthy",
            "Unhealthy",
            "Healthy",
        ]
        # Only real changes are streamed: three lists, no repeats.
        assert len(registration.lists) == 3
        follower.cancel()


async def test_allocate_returns_the_plugins_allocation(plugin_dir: str) -> None:
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(PolledPlugin(), plugin_dir) as server:
        stub = (await kubelet.wait_registrations(1)).stub
        response = await stub.Allocate(
            dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["w-0"])])
        )
        (container,) = response.container_responses
        assert dict(container.envs) == {"WIDGETS": "w-0"}
        assert dict(container.annotations) == {"example.com/widgets": "w-0"}
        assert [(m.container_path, m.host_path, m.read_only) for m in container.mounts] == [
            ("/var/widget", "/srv/widget", True)
        ]
        assert [(d.container_path, d.host_path, d.permissions) for d in container.devices] == [
            ("/dev/w-0", "/dev/w-0", "rw")
        ]
        assert [c.name for c in container.cdi_devices] == ["example.com/widget=w-0"]
        assert server.metrics.value("kubedevice_plugin_allocations_total", result="ok") == 1


async def test_allocate_errors_name_what_was_wrong_and_the_server_survives(plugin_dir: str) -> None:
    plugin = PolledPlugin()
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin, plugin_dir) as server:
        stub = (await kubelet.wait_registrations(1)).stub
        plugin.set_health("w-1", False)
        await kubelet.wait_health({"w-0": "Healthy", "w-1": "Unhealthy"})

        async def allocate(*ids: str) -> grpc.aio.AioRpcError:
            request = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Allocate(request)
            return caught.value

        unknown = await allocate("w-0", "nope-2", "nope-1")
        assert unknown.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert unknown.details() == "Allocate: unknown example.com/widget devices: nope-1, nope-2"

        unhealthy = await allocate("w-1")
        assert unhealthy.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert unhealthy.details() == "Allocate: unhealthy example.com/widget devices: w-1"

        empty = await allocate()
        assert empty.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "names no example.com/widget devices" in (empty.details() or "")

        plugin.set_health("w-1", True)
        await kubelet.wait_health({"w-0": "Healthy", "w-1": "Healthy"})
        crashed = await allocate("w-0", "w-1")
        assert crashed.code() == grpc.StatusCode.INTERNAL
        assert crashed.details() == "allocate failed: RuntimeError: w-0 and w-1 share a power rail"

        refused = await allocate("w-1")
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.details() == "allocate: w-1 is reserved for system pods"

        # Still serving after all that.
        ok = await stub.Allocate(
            dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["w-0"])])
        )
        assert dict(ok.container_responses[0].envs) == {"WIDGETS": "w-0"}
        assert server.metrics.value("kubedevice_plugin_allocations_total", result="invalid") == 4
        assert server.metrics.value("kubedevice_plugin_allocations_total", result="error") == 1


async def test_allocation_the_plugin_got_wrong_is_internal(plugin_dir: str) -> None:
    class Sloppy(PolledPlugin):
        async def allocate(self, devices: Sequence[Device]) -> Allocation:
            return Allocation(devices=[DeviceSpec("dev/w", "/dev/w", "rw")])

    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(Sloppy(), plugin_dir):
        stub = (await kubelet.wait_registrations(1)).stub
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Allocate(
                dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["w-0"])])
            )
        assert caught.value.code() == grpc.StatusCode.INTERNAL
        assert "device container_path must be an absolute path, got 'dev/w'" in (caught.value.details() or "")


async def test_optional_hooks_when_offered_and_when_not(plugin_dir: str) -> None:
    preferred_request = dp.PreferredAllocationRequest(
        container_requests=[
            dp.ContainerPreferredAllocationRequest(
                available_deviceIDs=["w-1", "w-0"], must_include_deviceIDs=["w-1"], allocation_size=2
            )
        ]
    )
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(PolledPlugin(), plugin_dir):
        stub = (await kubelet.wait_registrations(1)).stub
        for call in (
            stub.GetPreferredAllocation(preferred_request),
            stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["w-0"])),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED

    plugin = FullPlugin()
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin, plugin_dir):
        stub = (await kubelet.wait_registrations(1)).stub
        preferred = await stub.GetPreferredAllocation(preferred_request)
        assert [list(c.deviceIDs) for c in preferred.container_responses] == [["w-1", "w-0"]]
        await stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["w-0", "w-1"]))
        assert plugin.prestarted == [["w-0", "w-1"]]

        bad_requests = [
            (["w-0", "zz"], ["w-0"], 1, "GetPreferredAllocation: unknown example.com/widget devices: zz"),
            (["w-0"], ["w-1"], 1, "must-include devices not among available: w-1"),
            (["w-0", "w-1"], [], 3, "allocation_size 3 is outside [0, 2]"),
        ]
        for available, must, size, message in bad_requests:
            request = dp.PreferredAllocationRequest(
                container_requests=[
                    dp.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                    )
                ]
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetPreferredAllocation(request)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in (caught.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["w-9"]))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == "PreStartContainer: unknown example.com/widget devices: w-9"


async def test_a_failing_device_source_turns_its_devices_unhealthy_until_it_recovers(plugin_dir: str) -> None:
    class Flaky(PolledPlugin):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        async def devices(self) -> Sequence[Device]:
            self.calls += 1
            if self.calls == 3:
                raise OSError("health probe timed out")
            if self.calls == 4:
                return [Device("dup"), Device("dup")]  # a bad list is refused; the unhealthy one stays
            return await super().devices()

    plugin = Flaky()
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin, plugin_dir) as server:
        registration = await kubelet.wait_registrations(1)
        await wait_until(lambda: plugin.calls >= 6, what="source polled past its failures")
        await kubelet.wait_health({"w-0": "Healthy", "w-1": "Healthy"})
        plugin.set_health("w-0", False)
        await kubelet.wait_health({"w-0": "Unhealthy", "w-1": "Healthy"})
        healths = [{d.ID: d.health for d in message.devices} for message in registration.lists]
        # healthy, unhealthy while the source failed, healthy again, then the plugin's own change
        assert healths[:3] == [
            {"w-0": "Healthy", "w-1": "Healthy"},
            {"w-0": "Unhealthy", "w-1": "Unhealthy"},
            {"w-0": "Healthy", "w-1": "Healthy"},
        ], healths
        assert server.metrics.value("kubedevice_plugin_devices", health="unhealthy") == 1
        assert server.metrics.value("kubedevice_plugin_devices", health="healthy") == 1


def test_bad_configuration_is_refused_up_front(plugin_dir: str) -> None:
    class NoSource(DevicePlugin):
        resource_name = RESOURCE

    class BadName(PolledPlugin):
        resource_name = "widget"

    with pytest.raises(ConfigError, match="must override devices\\(\\) or watch_devices\\(\\)"):
        PluginServer(NoSource(), plugin_dir)
    with pytest.raises(ConfigError, match="resource name 'widget' must be <vendor-domain>/<name>"):
        PluginServer(BadName(), plugin_dir)
    with pytest.raises(ConfigError, match="unix socket limit"):
        PluginServer(PolledPlugin(), os.path.join(plugin_dir, "x" * 100))
