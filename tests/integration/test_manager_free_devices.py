"""The manager's free-device sets, kept up to date between admissions instead of rebuilt for each.

Every case admits, changes something the free set depends on (a failed Allocate, a snapshot, a
disconnect, garbage collection), and checks the next admission sees exactly the healthy, unallocated
devices.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager import AdmissionError
from tests.integration.fakeplugin import (
    FakePlugin,
    default_allocate,
    device,
    eventually,
    held,
    make_devices,
    one,
    registered,
    running_manager,
    serving,
)

R = "example.com/fake"


async def test_devices_of_a_failed_allocate_are_free_again(root: Path) -> None:
    fail = True

    async def flaky(request: dp.AllocateRequest) -> dp.AllocateResponse:
        if fail:
            raise RuntimeError("plugin says no")
        return await default_allocate(request)

    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(3), allocate=flaky)
        async with serving(plugin):
            await registered(m, plugin, 3)
            fail = False
            await m.allocate(*one("pod-1", 1))
            fail = True
            with pytest.raises(AdmissionError, match="Allocate rpc"):
                await m.allocate(*one("pod-2", 2))
            fail = False
            await m.allocate(*one("pod-3", 2))
            assert held(m, "pod-1") | held(m, "pod-3") == {"dev0", "dev1", "dev2"}


async def test_a_device_turning_unhealthy_is_not_handed_out(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(3))
        async with serving(plugin):
            await registered(m, plugin, 3)
            await m.allocate(*one("pod-1", 1))  # dev0; dev1 and dev2 are free
            plugin.set_devices([device("dev0"), device("dev1", "Unhealthy"), device("dev2")])
            await eventually(lambda: m.get_capacity()[1].get(R) == 2, what="dev1 unhealthy")
            with pytest.raises(AdmissionError, match="Requested: 2, Available: 1"):
                await m.allocate(*one("pod-2", 2))
            await m.allocate(*one("pod-3", 1))
            assert held(m, "pod-3") == {"dev2"}
            plugin.set_devices(make_devices(4))
            await eventually(lambda: m.get_capacity()[1].get(R) == 4, what="four healthy devices")
            await m.allocate(*one("pod-4", 2))
            assert held(m, "pod-4") == {"dev1", "dev3"}


async def test_a_device_turning_unhealthy_during_a_failed_allocate_stays_out(root: Path) -> None:
    called = asyncio.Event()
    answer = asyncio.Event()

    async def slow_failure(request: dp.AllocateRequest) -> dp.AllocateResponse:
        called.set()
        await answer.wait()
        raise RuntimeError("plugin says no")

    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2), allocate=slow_failure)
        async with serving(plugin):
            await registered(m, plugin, 2)
            stuck = asyncio.create_task(m.allocate(*one("pod-1", 1)))  # picks dev0
            await called.wait()
            plugin.set_devices([device("dev0", "Unhealthy"), device("dev1")])
            await eventually(lambda: m.get_capacity()[1].get(R) == 1, what="dev0 unhealthy")
            answer.set()
            with pytest.raises(AdmissionError, match="Allocate rpc"):
                await stuck
            plugin.allocate_handler = default_allocate
            await m.allocate(*one("pod-2", 1))
            assert held(m, "pod-2") == {"dev1"}
            with pytest.raises(AdmissionError, match="Requested: 1, Available: 0"):
                await m.allocate(*one("pod-3", 1))


async def test_a_disconnect_and_garbage_collection_are_seen_by_the_next_admission(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2))
        async with serving(plugin):
            await registered(m, plugin, 2)
            await m.allocate(*one("pod-1", 1))
            await m.allocate(*one("pod-2", 1))
            with pytest.raises(AdmissionError, match="Available: 0"):
                await m.allocate(*one("pod-3", 1))
            assert m.update_allocated_devices(["pod-1"]) == ["pod-2"]
            await m.allocate(*one("pod-3", 1))
            assert held(m, "pod-3") == held(m, "pod-1") ^ {"dev0", "dev1"}
            assert m.update_allocated_devices(["pod-1"]) == ["pod-3"]
            plugin.end_streams()
            await eventually(lambda: m.get_capacity()[1].get(R) == 0, what="the plugin's devices unhealthy")
            with pytest.raises(AdmissionError, match="no healthy devices present"):
                await m.allocate(*one("pod-4", 1))
