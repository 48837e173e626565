"""Scenario "memory": peak RSS of a process running the manager with many devices and containers.

A child process (`python -m bench.memory DEVICES CONTAINERS`) starts a DeviceManager, gets DEVICES devices
from an in-process BenchPlugin, admits CONTAINERS one-device pods (32 in flight), and prints its VmHWM
(peak resident set) from /proc/self/status as JSON. The plugin's own share is small: it holds the one
pre-serialized message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path

from bench.admission import admit_all, one_device_pods
from bench.common import Figures, Scale, Target, admitting_node, short_tempdir

NAME = "memory"
#: Devices and allocated containers at each scale; the 300 MB target is for the full one.
SIZES = {Scale.QUICK: (1_000, 100), Scale.SHORT: (10_000, 1_000), Scale.FULL: (100_000, 10_000)}
REPO = Path(__file__).resolve().parent.parent


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def child(devices: int, containers: int) -> dict[str, float]:
    baseline = _status_kib("VmRSS")
    with short_tempdir() as root:
        async with admitting_node(root, devices) as (tm, manager):
            after_devices = _status_kib("VmRSS")
            start = time.perf_counter()
            await admit_all(tm, manager, one_device_pods(containers), 32)
            admitted = time.perf_counter() - start
            after_pods = _status_kib("VmRSS")
            if len(manager.pod_uids()) != containers:
                raise RuntimeError(f"{len(manager.pod_uids())} of {containers} pods hold devices")
    return {
        "baseline_mb": baseline / 1024,
        "after_devices_mb": after_devices / 1024,
        "after_containers_mb": after_pods / 1024,
        "peak_mb": _status_kib("VmHWM") / 1024,
        "admission_s": admitted,
    }


async def measure(devices: int, containers: int) -> dict[str, float]:
    repo = REPO
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.memory",
        str(devices),
        str(containers),
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the memory child exited with {proc.returncode}")
    result: dict[str, float] = json.loads(out)
    return result


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    devices, containers = SIZES[scale]
    label = f"{devices:,} devices + {containers:,} containers"
    for _ in range(runs):
        r = await measure(devices, containers)
        figures.add(
            f"{label}: peak RSS", r["peak_mb"], "MB", target=Target(300.0) if scale is Scale.FULL else None
        )
        figures.add(f"{label}: RSS after imports", r["baseline_mb"], "MB")
        figures.add(f"{label}: RSS growth, devices", r["after_devices_mb"] - r["baseline_mb"], "MB")
        figures.add(
            f"{label}: RSS growth, containers", r["after_containers_mb"] - r["after_devices_mb"], "MB"
        )
    return figures


if __name__ == "__main__":
    logging.disable(logging.WARNING)
    print(json.dumps(asyncio.run(child(int(sys.argv[1]), int(sys.argv[2])))))
