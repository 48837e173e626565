"""Start, stop, restarts, checkpoint, stream ends, grace period, probe-mode plugins."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.checkpoint import CheckpointData, PodDevicesEntry, encode
from kubedevice.manager import AdmissionError, Container, DeviceManager, Pod
from tests.integration.fakeplugin import (
    FakePlugin,
    device,
    eventually,
    make_devices,
    running_manager,
    serving,
)

R = "example.com/fake"
CHECKPOINT = "kubelet_internal_checkpoint"


def one(pod_uid: str, count: int, resource: str = R) -> tuple[Pod, Container]:
    c = Container("c", {resource: count})
    return Pod(pod_uid, containers=[c]), c


def held(m: DeviceManager, pod: str, container: str = "c") -> set[str]:
    devices = m.get_devices(pod, container)
    assert devices is not None
    return set(devices.get(R, {}))


async def test_start_cleans_stale_sockets_only(root: Path) -> None:
    dp_dir = root / "dp"
    dp_dir.mkdir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(dp_dir / "stale.sock"))
    stale.close()
    (dp_dir / "notes.txt").write_text("keep me")
    (dp_dir / "subdir").mkdir()
    (dp_dir / CHECKPOINT).write_bytes(encode(CheckpointData(None, None)))
    m = DeviceManager(dp_dir)
    await m.start()
    try:
        assert not (dp_dir / "stale.sock").exists()
        assert (dp_dir / "notes.txt").read_text() == "keep me"
        assert (dp_dir / "subdir").is_dir() and (dp_dir / CHECKPOINT).exists()
        assert (dp_dir / "kubelet.sock").is_socket()
        assert m.checkpoint_error is None
    finally:
        await m.stop()
        await m.stop()  # idempotent


async def test_stop_without_start_and_path_too_long(root: Path) -> None:
    await DeviceManager(root / "dp").stop()
    with pytest.raises(ValueError, match="unix socket path limit"):
        DeviceManager(root / ("x" * 120))


async def test_stream_end_marks_unhealthy_then_grace_period_drops_the_resource(root: Path) -> None:
    async with running_manager(root, stop_grace_period=0.2) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(3))
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await eventually(lambda: m.get_capacity()[:2] == ({R: 3}, {R: 3}))
        await eventually(lambda: m.registered_resources()[0].state == "stopped")
        status = m.registered_resources()[0]
        assert status.unhealthy == 3 and status.healthy == 0 and status.stopped_seconds is not None
        deleted: list[str] = []

        def expired() -> bool:
            cap, _alloc, gone = m.get_capacity()
            deleted.extend(gone)
            return R not in cap

        await eventually(expired, what="the resource to leave capacity")
        assert deleted == [R] and m.registered_resources() == []
        await eventually(lambda: R not in (m.plugin_dir / CHECKPOINT).read_text(), what="checkpoint rewrite")


def test_grace_period_is_strict(root: Path) -> None:
    now = [100.0]
    m = DeviceManager(root / "dp", stop_grace_period=300.0, clock=lambda: now[0])
    from kubedevice.manager.endpoint import Endpoint

    e = Endpoint.stopped(R, now[0])
    assert not e.grace_period_expired(400.0, 300.0)
    assert e.grace_period_expired(400.001, 300.0)
    assert m.stop_grace_period == 300.0


async def test_duplicate_ids_and_unknown_health_are_reported_not_double_counted(root: Path) -> None:
    async with running_manager(root) as m:
        devices = [device("dev0"), device("dev0", "Unhealthy"), device("dev1", "healthy"), device("dev2", "")]
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, devices)
        other = FakePlugin(m.plugin_dir / "o.sock", "example.com/ok", make_devices(1))
        async with serving(plugin, other):
            await plugin.register(m.socket_path)
            await other.register(m.socket_path)
            await eventually(lambda: m.get_capacity()[0] == {R: 3, "example.com/ok": 1})
            assert m.get_capacity()[1] == {R: 0, "example.com/ok": 1}
            warning = m.registered_resources()[0].last_warning
            assert warning is not None
            assert "duplicate device IDs" in warning and "'dev0'" in warning
            assert "unknown health strings" in warning and "'dev1'='healthy'" in warning
            plugin.set_devices(make_devices(2))
            await eventually(lambda: m.get_capacity()[1].get(R) == 2)
            assert m.registered_resources()[0].last_warning is None


async def test_one_hundred_thousand_devices_in_one_message(root: Path) -> None:
    # Long IDs and topology make the message well above gRPC's 4 MiB default.
    devices = [device(f"GPU-{i:08d}-0650a168-e770-3ea8-8ac3-8a1d41976", numa=[i % 2]) for i in range(100_000)]
    assert dp.ListAndWatchResponse(devices=devices).ByteSize() > 4 * 1024 * 1024
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, devices)
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await eventually(lambda: m.get_capacity()[1].get(R) == 100_000, within=60)
            assert len(m.get_allocatable_devices()[R]) == 100_000
            await m.allocate(*one("pod-1", 3))
            assert len(held(m, "pod-1")) == 3


async def test_restart_restores_allocations_and_hands_nothing_out_twice(root: Path) -> None:
    dp_dir = root / "dp"
    pod1, c1 = one("pod-1", 2)
    async with running_manager(root) as m:
        plugin = FakePlugin(dp_dir / "p.sock", R, make_devices(4))
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await eventually(lambda: m.get_capacity()[1] == {R: 4})
            await m.allocate(pod1, c1)
            first = held(m, "pod-1")
            before = await m.get_device_run_container_options(pod1, c1)
    async with running_manager(root) as m:
        assert m.checkpoint_error is None
        assert held(m, "pod-1") == first
        [status] = m.registered_resources()
        assert status.state == "stopped" and status.allocated == 2
        assert m.get_capacity()[:2] == ({R: 0}, {R: 0})
        # The cached responses serve the restarted container without a plugin.
        assert await m.get_device_run_container_options(pod1, c1) == before
        with pytest.raises(AdmissionError, match="no healthy devices present"):
            await m.allocate(*one("pod-2", 1))
        plugin = FakePlugin(dp_dir / "p2.sock", R, make_devices(4))
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await eventually(lambda: m.get_capacity()[:2] == ({R: 4}, {R: 4}))
            assert m.registered_resources()[0].state == "running"
            await m.allocate(pod1, c1)  # already has its devices: no new Allocate
            assert plugin.allocate_calls == []
            await m.allocate(*one("pod-2", 2))
            assert held(m, "pod-2").isdisjoint(first)
            with pytest.raises(AdmissionError, match="Requested: 1, Available: 0"):
                await m.allocate(*one("pod-3", 1))


async def test_restart_fast_path_for_running_containers(root: Path) -> None:
    pod1, c1 = one("pod-1", 1)
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2))
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await eventually(lambda: m.get_capacity()[1] == {R: 2})
            await m.allocate(pod1, c1)
    m = DeviceManager(root / "dp")
    m.sources_ready = False
    await m.start(running_containers=[("pod-1", "c")])
    try:
        await m.allocate(pod1, c1)  # no plugin yet: only the fast path lets this through
        with pytest.raises(AdmissionError, match="no healthy devices present"):
            await m.allocate(Pod("pod-1", containers=[Container("d", {R: 1})]), Container("d", {R: 1}))
        await m.allocate(pod1, c1, already_running=True)
        assert m.update_allocated_devices([]) == []  # sources not ready: nothing collected
    finally:
        await m.stop()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"a.com/b":["x"]}},"Checksum":1',
        b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"a.com/b":["x"]}},"Checksum":1}',
    ],
    ids=["empty", "garbage", "truncated", "checksum-mismatch"],
)
async def test_bad_checkpoint_is_quarantined_and_the_manager_starts_empty(root: Path, content: bytes) -> None:
    dp_dir = root / "dp"
    dp_dir.mkdir()
    (dp_dir / CHECKPOINT).write_bytes(content)
    async with running_manager(root) as m:
        assert m.checkpoint_error
        assert m.quarantined_checkpoint is not None
        assert m.quarantined_checkpoint.name.startswith(CHECKPOINT + ".corrupt-")
        assert m.quarantined_checkpoint.read_bytes() == content
        assert m.registered_resources() == [] and m.pod_uids() == set()
        plugin = FakePlugin(dp_dir / "p.sock", R, make_devices(1))
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await eventually(lambda: m.get_capacity()[1] == {R: 1})
            await m.allocate(*one("pod-1", 1))
        assert '"pod-1"' in (dp_dir / CHECKPOINT).read_text()


async def test_checkpoint_entries_restore_with_numa_and_cdi_and_bad_entries_are_skipped(root: Path) -> None:
    resp = dp.ContainerAllocateResponse(
        envs={"A": "1"}, cdi_devices=[dp.CDIDevice(name="vendor.com/gpu=0")]
    ).SerializeToString()
    data = CheckpointData(
        pod_device_entries=[
            PodDevicesEntry("pod-1", "c", R, {0: ["d0"], 1: ["d1", "d2"], -1: ["d3"]}, resp),
            PodDevicesEntry("pod-2", "c", R, {0: ["d4"]}, b"\xff\xff\xff"),
            PodDevicesEntry("pod-3", "c", "other.com/x", {-1: ["x0"]}, None),
        ],
        registered_devices={R: ["d0"]},
    )
    dp_dir = root / "dp"
    dp_dir.mkdir()
    (dp_dir / CHECKPOINT).write_bytes(encode(data))
    async with running_manager(root) as m:
        assert m.get_devices("pod-1", "c") == {R: {"d0": (0,), "d1": (1,), "d2": (1,), "d3": ()}}
        assert m.get_devices("pod-2", "c") is None
        opts = await m.get_device_run_container_options(*one("pod-1", 4))
        assert opts is not None and opts.envs == [("A", "1")] and opts.cdi_devices == ["vendor.com/gpu=0"]
        # A resource known only from allocations is a device-plugin resource that is not registered.
        with pytest.raises(AdmissionError) as err:
            await m.allocate(*one("pod-9", 1, "other.com/x"))
        assert str(err.value) == "cannot allocate unregistered device other.com/x"
        await m.write_checkpoint()
        text = (dp_dir / CHECKPOINT).read_text()
        assert '"RegisteredDevices":{"example.com/fake":[]}' in text and '"pod-2"' not in text


async def test_probe_mode_plugin_registers_and_deregisters(root: Path) -> None:
    registry = root / "registry"
    registry.mkdir()
    async with running_manager(root, plugins_registry=registry, watch_interval=0.02) as m:
        info = reg.PluginInfo(type="DevicePlugin", name=R, endpoint="", supported_versions=["v1beta1"])
        plugin = FakePlugin(registry / "p.sock", R, make_devices(2), info=info)
        await plugin.start()
        try:
            await eventually(lambda: m.get_capacity()[1] == {R: 2})
            await eventually(lambda: len(plugin.registration_status) == 1)
            assert plugin.registration_status[0].plugin_registered
            assert plugin.registration_status[0].error == ""
        finally:
            await plugin.stop()
        plugin.socket_path.unlink(missing_ok=True)
        await eventually(lambda: m.get_capacity()[1] == {R: 0}, what="deregistration")
        assert (
            m.metrics.registry.get_sample_value(
                "kubelet_device_plugin_registration_total", {"resource_name": R}
            )
            is None
        )


async def test_probe_mode_separate_endpoint_is_used_as_is(root: Path) -> None:
    registry = root / "registry"
    registry.mkdir()
    async with running_manager(root, plugins_registry=registry, watch_interval=0.02) as m:
        service = FakePlugin(root / "service.sock", R, make_devices(3))
        info = reg.PluginInfo(
            type="DevicePlugin",
            name=R,
            endpoint=str(service.socket_path),
            supported_versions=["v1", "v1beta1"],
        )
        front = FakePlugin(registry / "front.sock", R, info=info)
        async with serving(service, front):
            await eventually(lambda: m.get_capacity()[1] == {R: 3})
            assert m.registered_resources()[0].endpoints == [str(service.socket_path)]


@pytest.mark.parametrize(
    ("info", "error"),
    [
        (
            reg.PluginInfo(type="CSIPlugin", name=R, supported_versions=["v1beta1"]),
            "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at socket {path}",
        ),
        (
            reg.PluginInfo(type="DevicePlugin", name=R, supported_versions=["v1alpha", "v2"]),
            "RegisterPlugin error -- plugin validation failed with err: manager version, v1beta1, "
            "is not among plugin supported versions [v1alpha v2]",
        ),
        (
            reg.PluginInfo(type="DevicePlugin", name="gpu", supported_versions=["v1beta1"]),
            "RegisterPlugin error -- plugin validation failed with err: "
            'invalid name of device plugin socket: the ResourceName "gpu" is invalid',
        ),
        (
            reg.PluginInfo(
                type="DevicePlugin", name=R, endpoint="/nonexistent.sock", supported_versions=["v1beta1"]
            ),
            "RegisterPlugin error -- plugin registration failed with err: failed to dial device plugin: "
            'connection error: desc = "transport: Error while dialing: dial unix /nonexistent.sock: '
            'connect: no such file or directory"',
        ),
    ],
    ids=["type", "version", "name", "dial"],
)
async def test_probe_mode_refusals_are_notified(root: Path, info: reg.PluginInfo, error: str) -> None:
    registry = root / "registry"
    registry.mkdir()
    async with running_manager(root, plugins_registry=registry, watch_interval=0.02, dial_timeout=0.2) as m:
        plugin = FakePlugin(registry / "p.sock", R, make_devices(1), info=info)
        async with serving(plugin):
            await eventually(lambda: len(plugin.registration_status) == 1)
            [status] = plugin.registration_status
            assert not status.plugin_registered
            assert status.error == error.format(path=plugin.socket_path)
            assert m.registered_resources() == []


async def test_hidden_files_in_the_registry_are_ignored(root: Path) -> None:
    registry = root / "registry"
    registry.mkdir()
    async with running_manager(root, plugins_registry=registry, watch_interval=0.02) as m:
        info = reg.PluginInfo(type="DevicePlugin", name=R, supported_versions=["v1beta1"])
        hidden = FakePlugin(registry / ".hidden.sock", R, make_devices(1), info=info)
        visible = FakePlugin(registry / "v.sock", "example.com/v", make_devices(1), info=info)
        visible.info = reg.PluginInfo(
            type="DevicePlugin", name="example.com/v", supported_versions=["v1beta1"]
        )
        async with serving(hidden, visible):
            await eventually(lambda: len(visible.registration_status) == 1)
            assert hidden.registration_status == []
            assert hidden.socket_path.is_socket()
            assert [s.resource_name for s in m.registered_resources()] == ["example.com/v"]
