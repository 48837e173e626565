"""Scenario "daemon": N one-device pods through the node daemon, from manifests to Running.

The daemon (`kubedevice node`) and the SDK's fake plugin (`kubedevice plugin fake`) run as real processes
under one temporary root. Once the plugin's devices are allocatable, N manifests are written (each to a
temporary name, then renamed, as a config management tool would) and the clock runs until the status
socket's /pods shows every pod Running. Rendering /pods costs the daemon O(pods), so while pods are
still being admitted the bench watches the cheap `kubedevice_node_pods{phase="Running"}` gauge of
/metrics every 50 ms (the resolution) and asks /pods once the gauge says all are Running.

A second figure admits N pods that request zero of the resource: no device, no Allocate and no checkpoint
entry, so the daemon records each one as Running in its state file (group commit) before reporting it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from bench.common import CLI, RESOURCE, Figures, Target, short_tempdir
from kubedevice.node.config import NodePaths
from kubedevice.node.http import StatusClientError, get

NAME = "daemon"
POLL_S = 0.05
#: Within 3x of the manager's own sequential admission target (bench admission: >= 500 pods/s): the
#: daemon adds manifest parsing, pod bookkeeping and the status API, not another order of magnitude.
RATE_TARGET = Target(500 / 3, "higher")

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
    """The daemon and the plugin as subprocesses; their output goes to files under the root."""

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

    async def status(self, path: str) -> Any:
        body = await get(self.paths.status_socket, path, wait=30.0)
        return body.decode() if path == "/metrics" else json.loads(body)

    async def wait_status(self, path: str, ok: Any, what: str, within: float = 120.0) -> Any:
        deadline = time.monotonic() + within
        while True:
            for proc in self.procs:
                if proc.returncode is not None:
                    raise RuntimeError(f"a process exited with {proc.returncode} while waiting for {what}")
            try:
                value = await self.status(path)
                if ok(value):
                    return value
            except StatusClientError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {within:g} s waiting for {what}")
            await asyncio.sleep(POLL_S)

    async def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


def running_gauge(metrics: str) -> int:
    for line in metrics.splitlines():
        if line.startswith('kubedevice_node_pods{phase="Running"}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def write_manifests(folder: Path, count: int, quantity: str) -> None:
    for i in range(count):
        final = folder / f"bench-{i:06d}.yaml"
        temp = folder / f".bench-{i:06d}.yaml.tmp"
        temp.write_text(MANIFEST.format(i=i, resource=RESOURCE, quantity=quantity))
        os.replace(temp, final)


async def measure(pods: int, quantity: str = "1") -> float:
    with short_tempdir() as root:
        procs = Processes(root)
        try:
            await procs.spawn("daemon", "node", "--root-dir", str(root))
            await _wait_socket(procs)
            await procs.spawn(
                "plugin",
                "plugin",
                "fake",
                "--resource",
                RESOURCE,
                "--devices",
                str(pods),
                "--numa-nodes",
                "2",
                "--numa-layout",
                "block",
                "--plugin-dir",
                str(procs.paths.plugin_dir),
                "--log-level",
                "warning",
            )
            await procs.wait_status(
                "/node", lambda v: v["allocatable"].get(RESOURCE) == pods, f"{pods} allocatable devices"
            )
            start = time.perf_counter()
            await asyncio.to_thread(write_manifests, procs.paths.manifests, pods, quantity)
            await procs.wait_status(
                "/metrics", lambda text: running_gauge(text) == pods, f"{pods} pods Running", within=600.0
            )
            listed = await procs.status("/pods")
            elapsed = time.perf_counter() - start
            running = sum(1 for p in listed if p.get("phase") == "Running")
            if running != pods:
                raise RuntimeError(f"/metrics counted {pods} Running pods but /pods lists {running}")
            return elapsed
        finally:
            await procs.close()


async def _wait_socket(procs: Processes) -> None:
    deadline = time.monotonic() + 60.0
    while not procs.paths.status_socket.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for the daemon's status socket")
        if procs.procs[0].returncode is not None:
            raise RuntimeError(f"the daemon exited with {procs.procs[0].returncode}")
        await asyncio.sleep(0.01)


async def run(*, quick: bool, runs: int) -> Figures:
    figures = Figures(NAME)
    pods = 20 if quick else 1_000
    for _ in range(runs):
        elapsed = await measure(pods)
        kubelet = (None, None) if quick else ("3.98 s (device manager only)", "251 /s")
        figures.add(f"{pods:,} manifests to Running", elapsed, "s", kubelet=kubelet[0])
        figures.add(
            f"{pods:,} manifests: rate",
            pods / elapsed,
            "pods/s",
            target=None if quick else RATE_TARGET,
            kubelet=kubelet[1],
        )
        elapsed = await measure(pods, '"0"')
        figures.add(f"{pods:,} zero-request manifests: rate", pods / elapsed, "pods/s")
    return figures
