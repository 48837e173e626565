"""Plugins and a runner shared by the DRA face's integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubedevice.plugin import Allocation, Device, DevicePlugin
from kubedevice.plugin.dra.model import Claim, ClaimRef, PreparedDevice
from kubedevice.plugin.dra.paths import DRAPaths
from kubedevice.plugin.dra.runner import FacesServer
from kubedevice.plugin.events import LifecycleEvent
from tests.dra_kubelet import DRIVER, MemoryBackend
from tests.waiting import poll_async, short_tempdir


class Gpus(DevicePlugin):
    """A device plugin written for the device plugin API; DRA needs only driver_name and api."""

    resource_name = "example.com/gpu"
    driver_name = DRIVER

    def __init__(self, devices: Sequence[Device] = (Device("gpu-0"), Device("gpu-1"))) -> None:
        self.current = list(devices)
        self.changed = asyncio.Event()
        self.allocations: list[list[str]] = []

    def set_devices(self, devices: Sequence[Device]) -> None:
        self.current = list(devices)
        self.changed.set()

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        while True:
            self.changed.clear()
            yield list(self.current)
            await self.changed.wait()

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        ids = [d.id for d in devices]
        self.allocations.append(ids)
        return Allocation(envs={"GPUS": ",".join(ids)}, cdi_devices=[f"gpu.example.com/gpu={i}" for i in ids])


class HookedGpus(Gpus):
    """Own prepare/unprepare hooks; fails the claims named in `failing`."""

    def __init__(self, failing: Sequence[str] = ()) -> None:
        super().__init__()
        self.failing = set(failing)
        self.prepared: list[Claim] = []
        self.unprepared: list[ClaimRef] = []

    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        self.prepared.append(claim)
        if claim.uid in self.failing:
            raise RuntimeError("GPU busy")
        return [PreparedDevice(r, (f"gpu.example.com/gpu={r.device_id}",)) for r in claim.results]

    async def unprepare(self, claim: ClaimRef) -> None:
        self.unprepared.append(claim)


@pytest.fixture
def kubelet_dir() -> Iterator[Path]:
    directory = short_tempdir("kdra-")
    (directory / "plugins_registry").mkdir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def paths_of(kubelet_dir: Path, uid: str = "") -> DRAPaths:
    return DRAPaths(kubelet_dir, DRIVER, uid)


@contextlib.asynccontextmanager
async def running(
    plugin: DevicePlugin,
    kubelet_dir: Path,
    backend: MemoryBackend,
    *,
    api: str = "dra",
    events: list[LifecycleEvent] | None = None,
    dra_options: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[FacesServer]:
    """Serve `plugin` until the block ends; returns once the DRA sockets answer to the file system."""
    options_ = {"cdi_spec_dir": kubelet_dir / "cdi", "boot_id_file": kubelet_dir / "boot_id"}
    options_.update(dra_options or {})
    server = FacesServer(
        plugin,
        api,
        kubelet_dir=kubelet_dir,
        backend=backend,
        dra_options=options_,
        on_event=events.append if events is not None else None,
        **options,
    )
    await server.start()
    try:
        if server.dra is not None:
            paths = server.dra.paths
            await poll_async(
                lambda: paths.dra_socket.exists() and paths.registration_socket.exists(), "DRA sockets"
            )
        yield server
    finally:
        await server.stop()
