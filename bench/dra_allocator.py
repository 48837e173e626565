"""Scenario "dra-allocator": the local allocator's cost per claim, with real CEL selectors.

4 drivers x 64 devices (attributes of each kind, a memory capacity), 200 pods one after another, each
with one claim of 2 requests: the class selects by driver, and each request adds a CEL selector (a
quantity comparison; a string and semver test). Pods finish as they go (one live claim per 4 devices at
most, so half the devices are in use and the search skips them), as on a busy node. Figures: the cost
per claim (median, p99), the rate, the cost of pods 151-200 over pods 51-100 (flat: about 1), the first
evaluation of a selector on a device (uncached), and the RSS growth over 10 runs of 200 pods sharing one
CelSelectors (its caches are bounded; the CEL library leaks on Python-defined functions unless results
are cached). The 1.37 profile (bench/dra_allocator_137.py): partitions and shared devices on 1,024
devices, the cost per claim at 200, 1,000 and 5,000 pods.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from pathlib import Path

from bench import dra_allocator_137 as profile_137
from bench.common import Figures, Scale, Target
from bench.pod_latency import percentile
from kubedevice.resource.capacity import DeviceCapacity
from kubedevice.resource.model import (
    DeviceClassDocument,
    DeviceID,
    DeviceRequest,
    ExactDeviceRequest,
    ObjectMeta,
    ResourceClaimSpec,
)
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.slice_model import AttributeValue, Pool, ResourceSliceDocument, SliceDevice
from kubedevice.scheduler.allocator import AllocationRequest, ClaimToAllocate, allocate
from kubedevice.scheduler.cel import CelDevice, CelSelectors

NAME = "dra-allocator"
NODE = "node-1"
CLASS = DeviceClassDocument(
    meta=ObjectMeta(name="bench"), selectors=("device.driver.endsWith('.bench.example.com')",)
)
SELECTORS = (
    "device.capacity[device.driver].memory.compareTo(quantity('16Gi')) >= 0",
    "device.attributes[device.driver].model.startsWith('m') && "
    "device.attributes[device.driver].driverVersion.isGreaterThan(semver('1.0.0'))",
)


def pools(drivers: int, devices: int) -> list[Pool]:
    out = []
    for d in range(drivers):
        driver = f"d{d}.bench.example.com"
        items = tuple(
            SliceDevice(
                f"dev-{i}",
                {
                    "model": AttributeValue("string", f"m{i % 4}"),
                    "index": AttributeValue("int", i),
                    "driverVersion": AttributeValue("version", f"1.{i % 3}.0"),
                    "healthy": AttributeValue("bool", True),
                },
                {"memory": DeviceCapacity(Quantity.parse(f"{8 * (1 + i % 4)}Gi"))},
            )
            for i in range(devices)
        )
        document = ResourceSliceDocument(
            meta=ObjectMeta(name=f"{NODE}-{driver}"), driver=driver, node_name=NODE, pool=NODE, devices=items
        )
        out.append(Pool(driver=driver, name=NODE, generation=0, slices=(document,)))
    return out


def claim(index: int) -> ClaimToAllocate:
    requests = tuple(
        DeviceRequest(name=f"r{n}", exactly=ExactDeviceRequest("bench", (selector,)))
        for n, selector in enumerate(SELECTORS)
    )
    return ClaimToAllocate("default", f"pod-{index}-claim", ResourceClaimSpec(requests=requests))


def one_run(cel: CelSelectors, device_pools: list[Pool], pods: int) -> list[float]:
    """Seconds per claim, pods one after another; the oldest claim is freed once half the devices are held."""
    live_claims = sum(len(p.devices) for p in device_pools) // 4
    in_use: set[DeviceID] = set()
    live: deque[tuple[DeviceID, ...]] = deque()
    costs = []
    for index in range(pods):
        request = AllocationRequest(
            claims=(claim(index),),
            classes={"bench": CLASS},
            pools=device_pools,
            in_use=frozenset(in_use),
            namespaces={},
            node_name=NODE,
        )
        started = time.perf_counter()
        (allocation,) = allocate(request, cel)
        costs.append(time.perf_counter() - started)
        held = allocation.device_ids()
        in_use.update(held)
        live.append(held)
        if len(live) > live_claims:
            in_use.difference_update(live.popleft())
    return costs


def cold_evaluation(device_pools: list[Pool]) -> float:
    """Seconds per (selector, device) evaluation with nothing cached."""
    cel = CelSelectors()
    devices = [CelDevice.of(p.driver, d) for p in device_pools for d in p.devices]
    for selector in SELECTORS:
        cel.compile(selector)
    started = time.perf_counter()
    for selector in SELECTORS:
        for device in devices:
            cel.matches(selector, device)
    return (time.perf_counter() - started) / (len(SELECTORS) * len(devices))


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    drivers, devices, pods = (2, 8, 20) if quick else (4, 64, 200)
    memory_runs = 2 if quick else 10
    device_pools = pools(drivers, devices)
    window = max(1, pods // 4)
    label = f"{pods} pods, {drivers} drivers x {devices} devices"
    for _ in range(runs):
        cel = CelSelectors()
        costs = one_run(cel, device_pools, pods)
        figures.add(f"{label}: cost per claim, median", statistics.median(costs) * 1e3, "ms")
        figures.add(f"{label}: cost per claim, p99", percentile(costs, 0.99) * 1e3, "ms")
        figures.add(f"{label}: rate", pods / sum(costs), "pods/s")
        for start in range(0, pods, window):
            figures.add(
                f"cost per claim, pods {start + 1}-{start + window}: median",
                statistics.median(costs[start : start + window]) * 1e3,
                "ms",
            )
        first, last = costs[window : 2 * window], costs[-window:]
        figures.add(
            f"cost per claim, pods {pods - window + 1}-{pods} / pods {window + 1}-{2 * window}",
            statistics.median(last) / statistics.median(first),
            "x",
            target=Target(1.5) if not quick else None,
            note="flat: about 1 (pods 1-50 fill the CEL cache; the in-use half fills by pod 64)",
        )
        figures.add("first evaluation of a selector on a device", cold_evaluation(device_pools) * 1e6, "us")
    run_137(figures, quick=quick, runs=runs)
    cel = CelSelectors()
    one_run(cel, device_pools, pods)  # warm: the caches and the allocator's own first-use costs
    start = rss_kib()
    for _ in range(memory_runs - 1):
        one_run(cel, device_pools, pods)
    figures.add(
        f"RSS growth over {memory_runs} runs of {pods} pods (after the first)",
        rss_kib() - start,
        "KiB",
        target=Target(2048) if not quick else None,
        note=f"one CelSelectors throughout; {cel.cached_results} cached results",
    )
    return figures


def run_137(figures: Figures, *, quick: bool, runs: int) -> None:
    """Partitions and shares on 1,024 devices: the cost per claim as the pods that came before grow."""
    gpus, shares, sizes, live = (4, 4, (20,), 10) if quick else (96, 256, (200, 1000, 5000), 336)
    pools = [profile_137.mig_pool(gpus), profile_137.share_pool(shares)]
    devices = sum(len(p.devices) for p in pools)
    for _ in range(runs):
        medians = []
        for pods in sizes:
            cel = CelSelectors()
            costs = profile_137.measure(cel, pools, pods, live)
            label = f"partitions and shares, {devices} devices, {pods} pods"
            figures.add(f"{label}: cost per claim, median", costs["median"] * 1e3, "ms")
            figures.add(f"{label}: cost per claim, p99", costs["p99"] * 1e3, "ms")
            medians.append(costs["median"])
        if len(sizes) > 1:
            figures.add(
                f"partitions and shares: median at {sizes[-1]} pods / at {sizes[1]} pods",
                medians[-1] / medians[1],
                "x",
                target=Target(1.5) if not quick else None,
                note="flat: about 1 (both mostly after the node filled up, at pod 336)",
            )
    cel = CelSelectors()
    pods = sizes[0]
    profile_137.one_run(cel, pools, pods, live)  # warm
    start = rss_kib()
    repeats = 2 if quick else 5
    for _ in range(repeats):
        profile_137.one_run(cel, pools, pods, live)
    figures.add(
        f"partitions and shares: RSS growth over {repeats} more runs of {pods} pods",
        rss_kib() - start,
        "KiB",
        target=Target(2048) if not quick else None,
        note=f"one CelSelectors throughout; {cel.cached_results} cached results",
    )
