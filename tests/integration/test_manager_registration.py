"""Registration on kubelet.sock: validation, connection, re-registration, metrics."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from pathlib import Path

import grpc
import grpc.aio
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager import Container, DeviceManager, Pod
from kubedevice.manager.registration import REFUSAL_LOG_BURST, REFUSAL_LOG_QPS
from tests.integration.fakeplugin import (
    FakePlugin,
    eventually,
    make_devices,
    running_manager,
    serving,
)

R = "example.com/fake"


def capacity(m: DeviceManager) -> tuple[dict[str, int], dict[str, int]]:
    cap, alloc, _ = m.get_capacity()
    return cap, alloc


async def register_error(plugin: FakePlugin, sock: Path, **kwargs: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await plugin.register(sock, **kwargs)
    return info.value


async def test_register_then_devices_reach_capacity(root: Path) -> None:
    async with running_manager(root) as m:
        assert (m.plugin_dir.stat().st_mode & 0o777) == 0o750
        plugin = FakePlugin(
            m.plugin_dir / "fake.sock", R, make_devices(3) + make_devices(1, "bad", "Unhealthy")
        )
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await eventually(lambda: capacity(m) == ({R: 4}, {R: 3}), what="capacity 4/3")
            assert set(m.get_allocatable_devices()[R]) == {"dev0", "dev1", "dev2"}
            [status] = m.registered_resources()
            assert status.state == "running" and status.endpoints == [str(plugin.socket_path)]
            assert status.healthy == 3 and status.unhealthy == 1


async def test_register_is_synchronous(root: Path) -> None:
    """When Register returns, the endpoint is recorded (era B/C)."""
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "fake.sock", R, make_devices(1))
        async with serving(plugin):
            await plugin.register(m.socket_path)
            assert [s.resource_name for s in m.registered_resources()] == [R]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            "v1alpha",
            'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]',
        ),
        ("", 'requested API version "" is not supported by kubelet. Supported version is ["v1beta1"]'),
    ],
)
async def test_wrong_version_is_refused(root: Path, version: str, message: str) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "fake.sock", R, make_devices(1))
        async with serving(plugin):
            err = await register_error(plugin, m.socket_path, version=version)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.details() == message
            assert m.registered_resources() == []


@pytest.mark.parametrize(
    "name", ["gpu", "example.com/a/b", "kubernetes.io/foo", "Example.com/gpu", "requests.a.com/b"]
)
async def test_invalid_resource_name_is_refused(root: Path, name: str) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "fake.sock", name, make_devices(1))
        async with serving(plugin):
            err = await register_error(plugin, m.socket_path)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.details() == f'the ResourceName "{name}" is invalid'


async def test_endpoint_escaping_the_plugin_dir_is_refused(root: Path) -> None:
    async with running_manager(root) as m:
        outside = FakePlugin(root / "x.sock", R, make_devices(1))
        async with serving(outside):
            err = await register_error(outside, m.socket_path, endpoint="../x.sock")
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "escapes" in err.details() and "../x.sock" in err.details()
            err = await register_error(outside, m.socket_path, endpoint=str(outside.socket_path))
            assert "absolute path" in err.details()
            os.symlink(outside.socket_path, m.plugin_dir / "link.sock")
            err = await register_error(outside, m.socket_path, endpoint="link.sock")
            assert "symlink" in err.details() and str(outside.socket_path) in err.details()
            err = await register_error(outside, m.socket_path, endpoint="")
            assert "invalid endpoint" in err.details()
            assert m.registered_resources() == []


async def test_plugin_not_listening_fails_within_the_dial_timeout(root: Path) -> None:
    async with running_manager(root, dial_timeout=0.3) as m:
        ghost = FakePlugin(m.plugin_dir / "ghost.sock", R)  # never started
        err = await register_error(ghost, m.socket_path)
        assert err.code() == grpc.StatusCode.UNKNOWN
        assert err.details().startswith("failed to dial device plugin:")
        assert "ghost.sock" in err.details()
        # The manager keeps serving others.
        good = FakePlugin(m.plugin_dir / "good.sock", "example.com/good", make_devices(2))
        async with serving(good):
            await good.register(m.socket_path)
            await eventually(lambda: capacity(m)[0] == {"example.com/good": 2})


async def test_an_endpoint_with_no_socket_is_refused_at_once_not_at_the_deadline(root: Path) -> None:
    # A dial timeout longer than the caller's 30 s deadline: only an answer given without waiting for the
    # socket reaches the caller as the kubelet's dial error rather than DEADLINE_EXCEEDED.
    async with running_manager(root, dial_timeout=120) as m:
        ghost = FakePlugin(m.plugin_dir / "ghost.sock", R)  # never started: nothing at the path
        err = await register_error(ghost, m.socket_path)
        assert err.code() == grpc.StatusCode.UNKNOWN
        assert err.details() == (
            'failed to dial device plugin: connection error: desc = "transport: Error while dialing: '
            f'dial unix {m.plugin_dir / "ghost.sock"}: connect: no such file or directory"'
        )
        (m.plugin_dir / "plain.sock").write_text("not a socket")
        err = await register_error(ghost, m.socket_path, endpoint="plain.sock")
        assert err.code() == grpc.StatusCode.UNKNOWN
        assert err.details().endswith('connect: connection refused"')
        assert m.registered_resources() == []


async def test_refused_registrations_are_logged_within_a_rate_limit(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kubedevice.manager.registration")
    calls = 300
    async with running_manager(root, dial_timeout=120) as m:
        ghost = FakePlugin(m.plugin_dir / "ghost.sock", R)
        started = time.monotonic()
        errors = await asyncio.gather(*(register_error(ghost, m.socket_path) for _ in range(calls)))
        elapsed = time.monotonic() - started
    assert {e.code() for e in errors} == {grpc.StatusCode.UNKNOWN}
    lines = [r.getMessage() for r in caplog.records if r.name == "kubedevice.manager.registration"]
    assert lines[0] == (
        f"Error connecting to device plugin client for resource '{R}': failed to dial device plugin: "
        'connection error: desc = "transport: Error while dialing: '
        f'dial unix {m.plugin_dir / "ghost.sock"}: connect: no such file or directory"'
    )
    # The bucket's burst, then one a second of the time the calls took: never one line per call.
    bound = REFUSAL_LOG_BURST + math.ceil(elapsed * REFUSAL_LOG_QPS)
    assert 1 <= len(lines) <= min(bound, calls - 1)


async def test_registration_metric_counts_refused_attempts(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "fake.sock", R, make_devices(1))
        async with serving(plugin):
            await register_error(plugin, m.socket_path, version="v0")
            await plugin.register(m.socket_path)
        value = m.metrics.registry.get_sample_value(
            "kubelet_device_plugin_registration_total", {"resource_name": R}
        )
        assert value == 2


async def test_reregistration_with_a_new_socket_replaces_the_endpoint(root: Path) -> None:
    """Era C: the old plugin's late stream end does not mark the resource unhealthy."""
    async with running_manager(root) as m:
        old = FakePlugin(m.plugin_dir / "old.sock", R, make_devices(2))
        new = FakePlugin(m.plugin_dir / "new.sock", R, make_devices(3))
        async with serving(old):
            await old.register(m.socket_path)
            await eventually(lambda: capacity(m) == ({R: 2}, {R: 2}))
            pod = Pod("pod-1", containers=[Container("c", {R: 1})])
            await m.allocate(pod, pod.containers[0])
            async with serving(new):
                await new.register(m.socket_path)
                await eventually(lambda: capacity(m) == ({R: 3}, {R: 3}))
                old.end_streams()
                await old.stop()
                await eventually(lambda: m.registered_resources()[0].endpoints == [str(new.socket_path)])
                assert capacity(m) == ({R: 3}, {R: 3})
                assert m.registered_resources()[0].state == "running"
                assert m.get_devices("pod-1", "c") is not None


async def test_reregistration_with_the_same_socket_and_different_devices(root: Path) -> None:
    """A restarted plugin on the same socket: the new connection wins and its list replaces the old."""
    async with running_manager(root) as m:
        sock = m.plugin_dir / "fake.sock"
        first = FakePlugin(sock, R, make_devices(2))
        async with serving(first):
            await first.register(m.socket_path)
            await eventually(lambda: capacity(m) == ({R: 2}, {R: 2}))
        await eventually(lambda: capacity(m) == ({R: 2}, {R: 0}), what="devices unhealthy after the stop")
        assert m.registered_resources()[0].state == "stopped"
        second = FakePlugin(sock, R, make_devices(4, "other"))
        async with serving(second):
            await second.register(m.socket_path)
            await eventually(lambda: capacity(m) == ({R: 4}, {R: 4}))
            assert set(m.get_allocatable_devices()[R]) == {f"other{i}" for i in range(4)}
            assert m.registered_resources()[0].state == "running"


async def test_same_socket_registered_twice_keeps_one_live_endpoint(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "fake.sock", R, make_devices(2))
        async with serving(plugin):
            await plugin.register(m.socket_path)
            await plugin.register(m.socket_path)
            await eventually(lambda: capacity(m) == ({R: 2}, {R: 2}))
            await eventually(lambda: len(plugin._queues) == 1, what="the replaced stream to close")
            assert m.registered_resources()[0].endpoints == [str(plugin.socket_path)]


async def test_options_are_fetched_from_the_plugin(root: Path) -> None:
    """RegisterRequest.options is ignored; GetDevicePluginOptions decides (era B/C)."""
    async with running_manager(root) as m:
        plugin = FakePlugin(
            m.plugin_dir / "fake.sock",
            R,
            make_devices(1),
            options=dp.DevicePluginOptions(pre_start_required=True),
        )
        async with serving(plugin):
            await plugin.register(m.socket_path)
            [status] = m.registered_resources()
            assert status.pre_start_required and not status.get_preferred_allocation_available


async def test_newer_sibling_ending_leaves_the_older_live_one_primary(root: Path) -> None:
    """Era C: when one of two live endpoints ends, the survivor becomes primary and health is untouched."""
    async with running_manager(root) as m:
        old = FakePlugin(m.plugin_dir / "old.sock", R, make_devices(2))
        new = FakePlugin(m.plugin_dir / "new.sock", R, make_devices(2))
        async with serving(old):
            await old.register(m.socket_path)
            async with serving(new):
                await new.register(m.socket_path)
                await eventually(lambda: len(m.registered_resources()[0].endpoints) == 2)
                assert m.registered_resources()[0].endpoints[0] == str(new.socket_path)
            await eventually(lambda: m.registered_resources()[0].endpoints == [str(old.socket_path)])
            [status] = m.registered_resources()
            assert status.state == "running" and m.get_capacity()[:2] == ({R: 2}, {R: 2})
            await m.allocate(Pod("pod-1", containers=[Container("c", {R: 1})]), Container("c", {R: 1}))
            assert len(old.allocate_calls) == 1 and new.allocate_calls == []
