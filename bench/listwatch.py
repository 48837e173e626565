"""Scenario "listwatch": one plugin sends N devices in one ListAndWatch message to a real DeviceManager.

Measured: from the moment the plugin hands the message to gRPC until the manager reports allocatable == N
(woken by its change notification), then the same for a snapshot that flips 1% of the devices to
Unhealthy. Half the devices are on NUMA node 0, half on NUMA node 1.
"""

from __future__ import annotations

import time

from bench.common import (
    RESOURCE,
    BenchPlugin,
    Figures,
    Scale,
    Target,
    list_and_watch_bytes,
    short_tempdir,
    wait_for_allocatable,
)
from kubedevice.manager import DeviceManager

NAME = "listwatch"
#: Devices per snapshot at each scale.
SIZES = {
    Scale.QUICK: (100, 1_000),
    Scale.SHORT: (1_000, 10_000, 100_000),
    Scale.FULL: (1_000, 10_000, 100_000, 1_000_000),
}

KUBELET_APPLY = {100_000: "0.130 s", 1_000_000: "refused (> 149,796 devices: 4 MiB)"}
APPLY_TARGETS = {100_000: Target(0.5), 1_000_000: Target(5.0)}
FLIP_TARGETS = {100_000: Target(0.050)}


async def measure_once(
    count: int, snapshot: bytes, flipped: bytes, flipped_count: int
) -> tuple[float, float]:
    """(seconds to apply `count` devices, seconds to apply the 1% flip) for one fresh manager."""
    with short_tempdir() as root:
        manager = DeviceManager(root / "dp")
        await manager.start()
        plugin = BenchPlugin(root / "dp" / "bench.sock", snapshot)
        await plugin.start()
        try:
            await plugin.register(manager.socket_path)
            await wait_for_allocatable(manager, RESOURCE, count)
            applied = time.perf_counter() - plugin.sent_at
            plugin.send(flipped)
            await wait_for_allocatable(manager, RESOURCE, count - flipped_count)
            flip = time.perf_counter() - plugin.sent_at
        finally:
            await manager.stop()
            await plugin.stop()
    return applied, flip


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    for count in SIZES[scale]:
        snapshot = list_and_watch_bytes(count)
        sick = range(0, count, 100)
        flipped = list_and_watch_bytes(count, sick)
        for _ in range(runs):
            applied, flip = await measure_once(count, snapshot, flipped, len(sick))
            figures.add(
                f"apply {count:,} devices",
                applied,
                "s",
                target=APPLY_TARGETS.get(count),
                kubelet=KUBELET_APPLY.get(count),
                note=f"{len(snapshot) / 1e6:.1f} MB message",
            )
            figures.add(f"flip 1% of {count:,}", flip, "s", target=FLIP_TARGETS.get(count))
    return figures
