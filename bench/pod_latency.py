"""Scenario "latency": what a user waiting on pods feels, through the node daemon as real processes.

- One manifest written -> its pod Running, 200 pods one after another on an idle node whose plugin is
  registered: the median and the 99th percentile of the 200 latencies.
- 110 pods (the kubelet's default pod limit) written at once on a node with 8 resources of 16 devices
  each (one fake plugin per resource, pod i asks one device of resource i mod 8) -> all Running.

Running is when the daemon logs the pod Running (see bench "daemon").
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time

from bench.common import RESOURCE, Figures, Scale, Target, short_tempdir
from bench.daemon_admission import check_all_running, manifest_text, running_node, write_manifest

NAME = "latency"
ONE_BY_ONE = 200
MAX_PODS = 110
RESOURCES = 8
DEVICES_PER_RESOURCE = 16


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest sample with at least `fraction` of them at or below it."""
    ordered = sorted(samples)
    rank = math.ceil(fraction * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


async def one_by_one(pods: int) -> list[float]:
    """Seconds from writing each manifest to its pod Running, one pod at a time."""
    latencies: list[float] = []
    with short_tempdir() as root:
        async with running_node(root, {RESOURCE: pods}) as (procs, log):
            folder = procs.paths.manifests
            for i in range(pods):
                text = manifest_text(i)
                start = time.perf_counter()
                await asyncio.to_thread(write_manifest, folder, i, text)
                latencies.append(await log.wait_for(i + 1, procs, within=60.0) - start)
            await check_all_running(procs, pods)
    return latencies


def resource_name(index: int) -> str:
    return f"{RESOURCE}-{index}"


async def many_resources(pods: int, resources: int, devices: int) -> float:
    """Seconds from writing `pods` manifests at once to all Running, pod i on resource i mod `resources`."""
    with short_tempdir() as root:
        node = {resource_name(r): devices for r in range(resources)}
        async with running_node(root, node) as (procs, log):
            folder = procs.paths.manifests
            texts = [manifest_text(i, resource_name(i % resources)) for i in range(pods)]

            def write_all() -> None:
                for i, text in enumerate(texts):
                    write_manifest(folder, i, text)

            start = time.perf_counter()
            await asyncio.to_thread(write_all)
            end = await log.wait_for(pods, procs, within=120.0)
            await check_all_running(procs, pods)
    return end - start


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    count = 10 if quick else ONE_BY_ONE
    spread = (8, 2, 4) if quick else (MAX_PODS, RESOURCES, DEVICES_PER_RESOURCE)
    for _ in range(runs):
        latencies = await one_by_one(count)
        figures.add(
            f"one manifest to Running ({count} one at a time): median",
            statistics.median(latencies) * 1e3,
            "ms",
            target=None if quick else Target(10),
        )
        figures.add(
            f"one manifest to Running ({count} one at a time): p99",
            percentile(latencies, 0.99) * 1e3,
            "ms",
            target=None if quick else Target(30),
        )
        pods, resources, devices = spread
        figures.add(
            f"{pods} pods on {resources} resources x {devices} devices: all Running",
            await many_resources(pods, resources, devices),
            "s",
            target=None if quick else Target(0.3),
        )
    return figures
