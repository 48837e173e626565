"""Scenario "reregistration": how soon an SDK plugin registers again after kubelet.sock is re-created.

An in-process `PluginServer` (the SDK, with its inotify watcher, and again with the polling fallback)
runs beside a real DeviceManager. The manager is stopped, kubelet.sock removed and a new manager started,
20 times; each latency runs from the new socket's creation (its ctime) to the manager's "registered"
change, which follows the Register call once the plugin has been dialled, so the figure is an upper bound
on "Register received".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from bench.common import RESOURCE, Figures, Scale, Target, short_tempdir
from kubedevice.manager import Change, DeviceManager
from kubedevice.plugin import Allocation, Device, DevicePlugin, PluginServer

NAME = "reregistration"
#: kubelet.sock re-creations per mode at each scale: each is one sample.
SIZES = {Scale.QUICK: 3, Scale.SHORT: 10, Scale.FULL: 20}


class Widgets(DevicePlugin):
    resource_name = RESOURCE

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        yield [Device(f"w-{i}") for i in range(8)]
        await asyncio.Event().wait()  # the devices never change

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation(envs={"WIDGETS": ",".join(d.id for d in devices)})


async def start_and_wait_registered(plugin_dir: Path, within: float = 30.0) -> tuple[DeviceManager, float]:
    """Start a manager; return it and seconds from kubelet.sock's ctime to the plugin registering."""
    manager = DeviceManager(plugin_dir)
    registered = asyncio.get_running_loop().create_future()

    def on_change(change: Change) -> None:
        if change.kind == "registered" and not registered.done():
            registered.set_result(time.time_ns())

    manager.subscribe(on_change)
    await manager.start()
    created = manager.socket_path.stat().st_ctime_ns
    arrived = await asyncio.wait_for(registered, within)
    return manager, (arrived - created) / 1e9


async def measure(restarts: int, use_inotify: bool) -> list[float]:
    latencies: list[float] = []
    with short_tempdir() as root:
        plugin_dir = root / "dp"
        manager = DeviceManager(plugin_dir)
        await manager.start()
        server = PluginServer(Widgets(), str(plugin_dir), use_inotify=use_inotify)
        await server.start()
        try:
            # The first registration is the plugin starting, not a re-registration; wait it out.
            deadline = time.monotonic() + 30.0
            while not manager.registered_resources() or manager.registered_resources()[0].state != "running":
                if time.monotonic() > deadline:
                    raise TimeoutError("the plugin never registered")
                await asyncio.sleep(0.01)
            for _ in range(restarts):
                await manager.stop()
                with contextlib.suppress(FileNotFoundError):
                    manager.socket_path.unlink()
                manager, latency = await start_and_wait_registered(plugin_dir)
                latencies.append(latency)
        finally:
            await server.stop()
            await manager.stop()
    return latencies


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    restarts = SIZES[scale]
    for use_inotify in (True, False):
        mode = "inotify" if use_inotify else "polling fallback"
        latencies = await measure(restarts, use_inotify)
        # Each restart is one sample: the figure's median and max are over the restarts.
        for latency in latencies:
            figures.add(
                f"{restarts} re-creations, {mode}",
                latency * 1e3,
                "ms",
                target=Target(100.0) if use_inotify else None,
            )
    return figures
