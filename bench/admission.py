"""Scenario "admission": one-device pods admitted as the node daemon admits them (the topology manager's
admit under policy none, Allocate, run options).

The checkpoint is durable (fsync before each admission returns) as in production. Pods are admitted one
after another (what the kubelet does) and with 8 and 32 in flight (what the node daemon may do); group
commit of the checkpoint only helps the latter. The per-admission cost is shown per window of pods
(first 100, 100-300, 300-1,000) so any growth with the pod count is visible.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from bench.common import RESOURCE, Figures, Scale, Target, admitting_node, short_tempdir
from kubedevice.manager import Container, DeviceManager, Pod
from kubedevice.node.admission import admit
from kubedevice.topology import TopologyManager

NAME = "admission"

KUBELET_1K = {
    "rate": "251 /s",
    "first": "2.0 ms",
    "last": "5.9 ms",
}
KUBELET_10K = {"total": "331.8 s", "first": "124 /s", "last": "16 /s"}
#: Pods of the runs at each scale, and of the one run per mode that shows the curve to 10,000 (none: left
#: out, it takes a minute).
SIZES: dict[Scale, tuple[int, int | None]] = {
    Scale.QUICK: (30, 100),
    Scale.SHORT: (1_000, None),
    Scale.FULL: (1_000, 10_000),
}


def one_device_pods(count: int) -> list[Pod]:
    return [
        Pod(uid=f"pod-{i:06d}", name=f"bench-{i}", containers=[Container("main", {RESOURCE: 1})])
        for i in range(count)
    ]


async def admit_all(
    tm: TopologyManager, manager: DeviceManager, pods: Sequence[Pod], inflight: int
) -> list[float]:
    """Admit every pod with `inflight` admissions at a time; returns the completion times (s from start)."""
    done: list[float] = []
    queue = iter(pods)
    start = time.perf_counter()

    async def worker() -> None:
        for pod in queue:
            await admit(tm, manager, pod)
            done.append(time.perf_counter() - start)

    await asyncio.gather(*(worker() for _ in range(inflight)))
    return done


def window_cost(done: Sequence[float], lo: int, hi: int) -> float:
    """Mean seconds per admission for the admissions lo+1 .. hi (by completion order)."""
    begin = done[lo - 1] if lo > 0 else 0.0
    return (done[hi - 1] - begin) / (hi - lo)


async def measure(pods: int, devices: int, inflight: int) -> list[float]:
    with short_tempdir() as root:
        async with admitting_node(root, devices) as (tm, manager):
            done = await admit_all(tm, manager, one_device_pods(pods), inflight)
            writes = manager._writer.writes  # how many checkpoint writes the admissions cost
    done.append(float(writes))
    return done


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    pods, big = SIZES[scale]
    windows = ((0, 10), (10, 30)) if quick else ((0, 100), (100, 300), (300, 1_000))
    kubelet_1k = KUBELET_1K if not quick else {}
    kubelet_10k = KUBELET_10K if not quick else {}
    for inflight in (1, 8, 32):
        mode = "sequential" if inflight == 1 else f"{inflight} in flight"
        for _ in range(runs):
            *done, writes = await measure(pods, pods, inflight)
            rate_target = Target(500, "higher") if inflight == 1 and not quick else None
            figures.add(
                f"{pods:,} pods, {mode}: rate",
                pods / done[-1],
                "pods/s",
                target=rate_target,
                kubelet=kubelet_1k.get("rate") if inflight == 1 else None,
                note=f"{writes:.0f} checkpoint writes",
            )
            for lo, hi in windows:
                kubelet = None
                if inflight == 1 and lo == 0:
                    kubelet = kubelet_1k.get("first")
                elif inflight == 1 and hi == pods:
                    kubelet = kubelet_1k.get("last")
                figures.add(
                    f"{pods:,} pods, {mode}: per pod {lo + 1}-{hi}",
                    window_cost(done, lo, hi) * 1e3,
                    "ms",
                    kubelet=kubelet,
                )
    if big is None:
        return figures
    first = big // 10
    for inflight in (1, 32):
        mode = "sequential" if inflight == 1 else f"{inflight} in flight"
        # Three runs of 10,000 pods take minutes; one run each is enough to see the curve.
        for _ in range(1 if not quick else runs):
            *done, writes = await measure(big, big, inflight)
            figures.add(
                f"{big:,} pods on {big:,} devices, {mode}",
                done[-1],
                "s",
                target=Target(33.0) if inflight == 1 and not quick else None,
                kubelet=kubelet_10k.get("total") if inflight == 1 else None,
                note=f"{writes:.0f} checkpoint writes",
            )
            figures.add(
                f"{big:,} pods, {mode}: rate, first {first:,}",
                first / done[first - 1],
                "pods/s",
                kubelet=kubelet_10k.get("first") if inflight == 1 else None,
            )
            figures.add(
                f"{big:,} pods, {mode}: rate, last {first:,}",
                first / (done[-1] - done[-first - 1]),
                "pods/s",
                kubelet=kubelet_10k.get("last") if inflight == 1 else None,
            )
    return figures
