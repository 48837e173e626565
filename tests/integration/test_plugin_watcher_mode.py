"""Plugin-watcher ("probe mode") registration, and the metrics endpoint."""

from __future__ import annotations

import asyncio
import os
import urllib.request
from collections.abc import Sequence

import grpc
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.plugin import Allocation, Device, DevicePlugin, EventKind, LifecycleEvent, PluginServer
from tests.plugin_kubelet import exists, plugin_dir, wait_until

__all__ = ["plugin_dir"]


class Widgets(DevicePlugin):
    resource_name = "example.com/widget"
    poll_interval = 0.05

    async def devices(self) -> Sequence[Device]:
        return [Device("w-0", numa_nodes=(0,))]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation(envs={"W": ",".join(d.id for d in devices)})


async def test_plugin_watcher_mode_serves_registration_and_device_plugin(plugin_dir: str) -> None:
    registry = os.path.join(plugin_dir, "plugins_registry")
    os.mkdir(registry)  # the kubelet's plugin watcher creates it; a plugin only waits for it
    events: list[LifecycleEvent] = []
    async with PluginServer(
        Widgets(), plugin_watcher=True, registry_dir=registry, on_event=events.append
    ) as server:
        await wait_until(lambda: server.socket_path is not None, what="socket in the registry")
        socket_path = server.socket_path
        assert socket_path is not None and os.path.dirname(socket_path) == registry
        # What the kubelet's plugin watcher does (operation_generator.go): dial, GetInfo, then Notify.
        async with grpc.aio.insecure_channel(f"unix://{socket_path}") as channel:
            info = await reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=1)
            assert (info.type, info.name, info.endpoint, list(info.supported_versions)) == (
                "DevicePlugin",
                "example.com/widget",
                socket_path,
                ["v1beta1"],
            )
            device_plugin = dp_grpc.DevicePluginStub(channel)
            options = await device_plugin.GetDevicePluginOptions(dp.Empty())
            assert not options.pre_start_required
            stream = device_plugin.ListAndWatch(dp.Empty())
            first = await stream.read()
            assert isinstance(first, dp.ListAndWatchResponse)
            assert [(d.ID, d.health) for d in first.devices] == [("w-0", "Healthy")]
            stream.cancel()
            await reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
                reg.RegistrationStatus(
                    plugin_registered=False, error="RegisterPlugin error -- plugin validation failed"
                )
            )
            await reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
                reg.RegistrationStatus(plugin_registered=True)
            )
        statuses = [e.fields for e in events if e.kind == EventKind.WATCHER_STATUS]
        assert statuses == [
            {"registered": "false", "error": "RegisterPlugin error -- plugin validation failed"},
            {"registered": "true", "error": "-"},
        ]
        assert server.registrations == 0  # kubelet.sock is not used in this mode
        # Deleted socket (the kubelet deregisters on removal): served again so the watcher finds us.
        os.unlink(socket_path)
        await wait_until(
            lambda: server.socket_path != socket_path and exists(server.socket_path), what="re-serve"
        )
    assert not os.listdir(registry)


async def test_metrics_over_http(plugin_dir: str) -> None:
    async with PluginServer(Widgets(), plugin_dir, metrics_port=0) as server:
        await wait_until(lambda: server.metrics.value("kubedevice_plugin_devices", health="healthy") == 1)
        port = server.metrics_http_port
        assert port
        body = await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/metrics")
        assert 'kubedevice_plugin_devices{health="healthy",resource_name="example.com/widget"} 1.0' in body
        for family in ("allocations", "registrations", "kubelet_restarts"):
            assert f"# TYPE kubedevice_plugin_{family}_total counter" in body
    # The port is released on stop.
    with pytest.raises(OSError):
        await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/metrics")


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())
