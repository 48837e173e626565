"""Scenario "daemon": N one-device pods through the node daemon, from manifests to Running, beside the
manager alone admitting the same N pods in the same run.

The daemon (`kubedevice node`) and the SDK's fake plugin (`kubedevice plugin fake`) run as real processes
under one temporary root. Once the plugin's devices are allocatable, N manifests are written (each to a
temporary name, then renamed, as a config management tool would) and the clock runs until the daemon has
logged every pod Running (its log is followed with inotify, which costs the daemon nothing); /pods is
asked once at the end to check that it lists them all Running. The manager-only figure is bench
"admission"'s sequential run (the topology manager's admit, Allocate, run options, fsynced checkpoint,
no pod source), measured right before, so the ratio compares two figures taken under the same load.

A second figure admits N pods that request zero of the resource: no device, no Allocate and no checkpoint
entry, so the daemon records each one as Running in its state file (group commit) before reporting it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from asyncinotify import Inotify, Mask

from bench import admission
from bench.common import CLI, RESOURCE, Figures, Scale, Target, short_tempdir
from kubedevice.node.config import NodePaths
from kubedevice.statusapi.client import StatusClient, StatusClientError

NAME = "daemon"
POLL_S = 0.05
#: What the daemon logs when it reports a pod Running (one line per pod).
RUNNING_LINE = b"admitted: Running"
#: Through the daemon within 1.25x of the manager alone (issue 17): at 1,000 pods, >= 600 pods/s.
RATE_TARGET = Target(600, "higher")
RATIO_TARGET = Target(1.25)

MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: bench-{i:06d}
  namespace: default
spec:
  containers:
  - name: main
    image: busybox
    resources:
      limits:
        {resource}: {quantity}
"""


class Processes:
    """The daemon and the plugins as subprocesses; their output goes to files under the root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = NodePaths.under(root)
        self.procs: list[asyncio.subprocess.Process] = []

    async def spawn(self, name: str, *args: str) -> asyncio.subprocess.Process:
        with (self.root / f"{name}.log").open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                *CLI, *args, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log
            )
        self.procs.append(proc)
        return proc

    async def spawn_plugin(self, resource: str, devices: int, name: str = "plugin") -> None:
        await self.spawn(
            name,
            "plugin",
            "fake",
            "--resource",
            resource,
            "--devices",
            str(devices),
            "--numa-nodes",
            "2",
            "--numa-layout",
            "block",
            "--plugin-dir",
            str(self.paths.plugin_dir),
            "--log-level",
            "warning",
        )

    async def status(self, path: str) -> Any:
        body = await StatusClient(self.paths.status_socket, wait=30.0).get(path)
        return body.decode() if path == "/metrics" else json.loads(body)

    async def wait_status(self, path: str, ok: Any, what: str, within: float = 120.0) -> Any:
        deadline = time.monotonic() + within
        while True:
            self.check_alive(what)
            try:
                value = await self.status(path)
                if ok(value):
                    return value
            except StatusClientError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {within:g} s waiting for {what}")
            await asyncio.sleep(POLL_S)

    def check_alive(self, what: str) -> None:
        for proc in self.procs:
            if proc.returncode is not None:
                raise RuntimeError(f"a process exited with {proc.returncode} while waiting for {what}")

    async def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


class RunningLog:
    """Follows the daemon's log file and counts the pods it reported Running, waking on inotify."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("rb")
        self._inotify = Inotify()
        self._inotify.add_watch(path, Mask.MODIFY)
        self._tail = b""
        self.count = 0

    def close(self) -> None:
        self._inotify.close()
        self._file.close()

    def _read(self) -> None:
        data = self._tail + self._file.read()
        lines = data.split(b"\n")
        self._tail = lines.pop()
        self.count += sum(1 for line in lines if RUNNING_LINE in line)

    async def wait_for(self, count: int, procs: Processes, within: float = 600.0) -> float:
        """Wait until `count` pods were logged Running in all; returns perf_counter() when seen."""
        deadline = time.monotonic() + within
        while True:
            self._read()
            if self.count >= count:
                return time.perf_counter()
            procs.check_alive(f"{count} pods Running")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out after {within:g} s waiting for {count} pods Running")
            # A bounded wait: a process that dies writes nothing more.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, 1.0)):
                    await self._inotify.get()


@contextlib.asynccontextmanager
async def running_node(root: Path, resources: dict[str, int]) -> AsyncIterator[tuple[Processes, RunningLog]]:
    """The daemon with one fake plugin per resource (resource -> devices), all allocatable."""
    procs = Processes(root)
    try:
        await procs.spawn("daemon", "node", "--root-dir", str(root))
        await _wait_socket(procs)
        for i, (resource, devices) in enumerate(resources.items()):
            await procs.spawn_plugin(resource, devices, f"plugin-{i}")
        await procs.wait_status(
            "/node",
            lambda v: all(v["allocatable"].get(r) == n for r, n in resources.items()),
            "the plugins' devices allocatable",
        )
        log = RunningLog(root / "daemon.log")
        try:
            yield procs, log
        finally:
            log.close()
    finally:
        await procs.close()


def manifest_text(i: int, resource: str = RESOURCE, quantity: str = "1") -> str:
    return MANIFEST.format(i=i, resource=resource, quantity=quantity)


def write_manifest(folder: Path, i: int, text: str) -> None:
    final = folder / f"bench-{i:06d}.yaml"
    temp = folder / f".bench-{i:06d}.yaml.tmp"
    temp.write_text(text)
    os.replace(temp, final)


def write_manifests(folder: Path, count: int, quantity: str) -> None:
    for i in range(count):
        write_manifest(folder, i, manifest_text(i, quantity=quantity))


async def check_all_running(procs: Processes, pods: int) -> None:
    listed = (await procs.status("/pods"))["pods"]
    running = sum(1 for p in listed if p.get("phase") == "Running")
    if running != pods:
        raise RuntimeError(f"the daemon logged {pods} pods Running but /pods lists {running}")


async def measure(pods: int, quantity: str = "1") -> float:
    with short_tempdir() as root:
        async with running_node(root, {RESOURCE: pods}) as (procs, log):
            start = time.perf_counter()
            await asyncio.to_thread(write_manifests, procs.paths.manifests, pods, quantity)
            end = await log.wait_for(pods, procs)
            await check_all_running(procs, pods)
            return end - start


async def _wait_socket(procs: Processes) -> None:
    deadline = time.monotonic() + 60.0
    while not procs.paths.status_socket.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for the daemon's status socket")
        if procs.procs[0].returncode is not None:
            raise RuntimeError(f"the daemon exited with {procs.procs[0].returncode}")
        await asyncio.sleep(0.01)


async def manager_only_rate(pods: int) -> float:
    """bench "admission"'s sequential figure: the manager alone, pods/s."""
    *done, _writes = await admission.measure(pods, pods, 1)
    return pods / done[-1]


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    sizes = (20,) if quick else (100, 1_000)
    for _ in range(runs):
        for pods in sizes:
            manager_rate = await manager_only_rate(pods)
            elapsed = await measure(pods)
            big = pods == sizes[-1] and not quick
            kubelet = ("3.98 s (device manager only)", "251 /s") if big else (None, None)
            figures.add(f"{pods:,} manifests to Running", elapsed, "s", kubelet=kubelet[0])
            figures.add(
                f"{pods:,} manifests: rate",
                pods / elapsed,
                "pods/s",
                target=RATE_TARGET if big else None,
                kubelet=kubelet[1],
            )
            figures.add(f"{pods:,} manifests: per pod", elapsed / pods * 1e3, "ms")
            figures.add(f"{pods:,} pods, manager only: rate", manager_rate, "pods/s")
            figures.add(
                f"{pods:,} pods: manager rate / daemon rate",
                manager_rate * elapsed / pods,
                "x",
                target=RATIO_TARGET if big else None,
            )
        pods = sizes[-1]
        elapsed = await measure(pods, '"0"')
        figures.add(f"{pods:,} zero-request manifests: rate", pods / elapsed, "pods/s")
    return figures
