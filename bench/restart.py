"""Scenario "restart": starting over a checkpoint of N container entries.

The checkpoint is written with the project's codec (the kubelet's format). Measured twice:
- `DeviceManager.start()` in this process: read + verify + restore, until kubelet.sock is served;
- `kubedevice node --root-dir ...` as a fresh process: from spawning it to kubelet.sock accepting a
  connection, and to the PodResources socket answering List. This includes the interpreter start and
  the imports, which are shown on their own as "import kubedevice.cli".

The package is byte-compiled first, as pip does when it installs it: otherwise the figures would depend
on whether an earlier run left bytecode behind, and an editable install run under PYTHONDONTWRITEBYTECODE
compiles every module from source on each start (~50 ms), which no installed daemon pays.
"""

from __future__ import annotations

import asyncio
import compileall
import socket
import sys
import time
from pathlib import Path

import grpc
import grpc.aio

import kubedevice
from bench.common import RESOURCE, Figures, Scale, Target, device_id, short_tempdir
from bench.daemon_admission import Processes
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.checkpoint import CheckpointData, CheckpointStore, PodDevicesEntry
from kubedevice.manager import DeviceManager

NAME = "restart"
KUBELET = {1_000: "0.065 s", 10_000: "2.12 s"}


def write_checkpoint(directory: Path, entries: int) -> None:
    """A checkpoint of `entries` one-device containers plus the registered devices, as the kubelet writes."""
    records: list[PodDevicesEntry] = []
    for i in range(entries):
        did = device_id(i)
        resp = dp.ContainerAllocateResponse(envs={"WIDGETS": did})
        resp.devices.add(container_path=f"/dev/{did}", host_path=f"/dev/{did}", permissions="rw")
        resp.cdi_devices.add(name=f"{RESOURCE}={did}")
        records.append(
            PodDevicesEntry(
                pod_uid=f"00000000-0000-0000-0000-{i:012d}",
                container_name="main",
                resource_name=RESOURCE,
                device_ids={0 if i < entries // 2 else 1: [did]},
                alloc_resp=resp.SerializeToString(),
            )
        )
    directory.mkdir(mode=0o750, parents=True, exist_ok=True)
    CheckpointStore(directory).write(
        CheckpointData(
            pod_device_entries=records or None,
            registered_devices={RESOURCE: [device_id(i) for i in range(entries)]},
        )
    )


async def manager_start(root: Path, entries: int) -> float:
    manager = DeviceManager(root / "dp")
    start = time.perf_counter()
    await manager.start()
    elapsed = time.perf_counter() - start
    restored = len(manager.pod_uids())
    await manager.stop()
    if restored != entries:
        raise RuntimeError(f"the manager restored {restored} of {entries} checkpointed pods")
    return elapsed


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


async def daemon_start(root: Path) -> tuple[float, float]:
    """(seconds to kubelet.sock served, seconds to PodResources List answered) from spawning the daemon."""
    procs = Processes(root)
    paths = procs.paths
    try:
        start = time.perf_counter()
        daemon = await procs.spawn("daemon", "node", "--root-dir", str(root))
        deadline = start + 120.0
        while not _accepts(paths.kubelet_socket):
            if daemon.returncode is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"the daemon did not serve {paths.kubelet_socket}; see {root}/daemon.log")
            await asyncio.sleep(0.001)
        serving = time.perf_counter() - start
        while True:
            if daemon.returncode is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"PodResources never answered; see {root}/daemon.log")
            if paths.pod_resources_socket.exists():
                try:
                    async with grpc.aio.insecure_channel("unix://" + str(paths.pod_resources_socket)) as ch:
                        await pr_grpc.PodResourcesListerStub(ch).List(
                            pr.ListPodResourcesRequest(), timeout=1.0
                        )
                    break
                except grpc.aio.AioRpcError:
                    pass
            await asyncio.sleep(0.001)
        return serving, time.perf_counter() - start
    finally:
        await procs.close()


async def import_time() -> float:
    """Seconds for a fresh interpreter to import the CLI (the floor under any process start)."""
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import kubedevice.cli")
    if await proc.wait() != 0:
        raise RuntimeError("importing kubedevice.cli failed")
    return time.perf_counter() - start


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    await asyncio.to_thread(compileall.compile_dir, Path(kubedevice.__file__).parent, quiet=1)
    for entries in (10, 100) if scale is Scale.QUICK else (1_000, 10_000):
        with short_tempdir() as root:
            await asyncio.to_thread(write_checkpoint, root / "dp", entries)
            for _ in range(runs):
                figures.add(
                    f"{entries:,} entries: DeviceManager.start()",
                    await manager_start(root, entries),
                    "s",
                    target=Target(0.5) if entries == 10_000 else None,
                    kubelet=KUBELET.get(entries),
                )
        with short_tempdir() as root:
            await asyncio.to_thread(write_checkpoint, root / "device-plugins", entries)
            for _ in range(runs):
                serving, answering = await daemon_start(root)
                # The daemon rewrites the checkpoint; give every run the same file.
                await asyncio.to_thread(write_checkpoint, root / "device-plugins", entries)
                figures.add(
                    f"{entries:,} entries: process to kubelet.sock",
                    serving,
                    "s",
                    target=Target(0.25) if entries == 10_000 else None,
                    kubelet=KUBELET.get(entries),
                )
                figures.add(
                    f"{entries:,} entries: process to PodResources",
                    answering,
                    "s",
                    target=Target(0.35) if entries == 10_000 else None,
                )
    for _ in range(runs):
        figures.add("import kubedevice.cli (fresh interpreter)", await import_time(), "s")
    return figures
