"""Scenario "exporter": one `kubedevice exporter` refresh with 10,000 allocated containers, and its RSS.

The bench serves PodResources v1 in-process with 10,000 one-container pods holding one device each (and
10,250 allocatable devices), and writes a verified checkpoint with the same 10,000 entries. A real
`kubedevice exporter` process reads them; before each measured refresh the checkpoint's mtime moves, so
every refresh decodes the whole file again (the node's worst case: a kubelet that just allocated). The
refresh time is the exporter's own `kubedevice_exporter_refresh_duration_seconds`; the memory is the
process's peak resident set (VmHWM) over the whole run; a scrape (10,000 + 10,250 info series) is timed
by the bench.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc.aio
from prometheus_client.parser import text_string_to_metric_families

from bench.common import CLI, Figures, Scale, Target, short_tempdir, wait_until
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.checkpoint import CheckpointData, PodDevicesEntry, encode

NAME = "exporter"
RESOURCE = "bench.kubedevice.io/gpu"
REFRESHES = 5


def _device(i: int) -> pr.ContainerDevices:
    return pr.ContainerDevices(
        resource_name=RESOURCE,
        device_ids=[f"gpu-{i:05d}"],
        topology=pr.TopologyInfo(nodes=[pr.NUMANode(ID=i % 2)]),
    )


class _Lister(pr_grpc.PodResourcesListerServicer):
    def __init__(self, containers: int, devices: int) -> None:
        self._list = pr.ListPodResourcesResponse(
            pod_resources=[
                pr.PodResources(
                    name=f"pod-{i}",
                    namespace="bench",
                    containers=[pr.ContainerResources(name="main", devices=[_device(i)])],
                )
                for i in range(containers)
            ]
        )
        self._allocatable = pr.AllocatableResourcesResponse(devices=[_device(i) for i in range(devices)])

    async def List(self, request: object, context: object) -> pr.ListPodResourcesResponse:
        return self._list

    async def GetAllocatableResources(
        self, request: object, context: object
    ) -> pr.AllocatableResourcesResponse:
        return self._allocatable


def _checkpoint(path: Path, containers: int) -> None:
    entries = [
        PodDevicesEntry(f"uid-{i:05d}", "main", RESOURCE, {i % 2: [f"gpu-{i:05d}"]}, b"\n\x00")
        for i in range(containers)
    ]
    path.write_bytes(encode(CheckpointData(entries, {RESOURCE: [f"gpu-{i:05d}" for i in range(containers)]})))


def _scrape(url: str) -> tuple[dict[str, float], float]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode()
    took = time.perf_counter() - started
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.labels:
                values[s.name] = s.value
    return values, took


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), not a sample that could miss the peak."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


@contextmanager
def _exporter(root: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    log = root / "exporter.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *CLI,
                "exporter",
                "--podresources-socket",
                str(root / "kubelet.sock"),
                "--checkpoint",
                str(root / "checkpoint"),
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "0.5",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
        try:
            yield proc, log
        finally:
            proc.terminate()
            proc.wait(timeout=30)


async def _measure(root: Path, containers: int, devices: int) -> tuple[list[float], list[float], float]:
    server = grpc.aio.server(options=[("grpc.max_send_message_length", 256 * 1024 * 1024)])
    pr_grpc.add_PodResourcesListerServicer_to_server(_Lister(containers, devices), server)
    server.add_insecure_port(f"unix://{root / 'kubelet.sock'}")
    await server.start()
    _checkpoint(root / "checkpoint", containers)
    try:
        with _exporter(root) as (proc, log):
            url = ""

            def listening() -> bool:
                nonlocal url
                if proc.poll() is not None:
                    raise RuntimeError(f"the exporter exited: {log.read_text()[-2000:]}")
                match = re.search(r"serving (http://\S+/metrics)", log.read_text())
                url = match.group(1) if match else ""
                return bool(url)

            await wait_until(listening, "the exporter to listen", 60)
            refreshes, scrapes = [], []
            for _ in range(REFRESHES):
                # A new mtime: the next refresh decodes the whole checkpoint again.
                now = time.time_ns()
                os.utime(root / "checkpoint", ns=(now, now))
                values, _ = await asyncio.to_thread(_scrape, url)
                seen = values.get("kubedevice_exporter_refreshes_total", 0)
                while True:  # the refresh after the touch: two more than seen (one may be under way)
                    values, took = await asyncio.to_thread(_scrape, url)
                    if values.get("kubedevice_exporter_refreshes_total", 0) >= seen + 2:
                        break
                    await asyncio.sleep(0.05)
                if values.get("kubedevice_exporter_podresources_up") != 1:
                    raise RuntimeError(f"the exporter could not read PodResources: {log.read_text()[-2000:]}")
                refreshes.append(values["kubedevice_exporter_refresh_duration_seconds"])
                scrapes.append(took)
            return refreshes, scrapes, _peak_rss_mb(proc.pid)
    finally:
        await server.stop(None)


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    containers = 200 if scale is Scale.QUICK else 10_000
    devices = containers + containers // 40
    label = f"{containers:,} containers"
    for _ in range(runs):
        with short_tempdir() as root:
            refreshes, scrapes, rss = await _measure(root, containers, devices)
        for value in refreshes:
            figures.add(
                f"one refresh, {label} (checkpoint changed)",
                value,
                "s",
                target=Target(0.5),
                note="List + GetAllocatableResources + checkpoint decode",
            )
        for value in scrapes:
            figures.add(f"one scrape, {label}", value, "s")
        figures.add(f"exporter peak RSS, {label}", rss, "MB", target=Target(100))
    return figures
