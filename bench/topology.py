"""Scenario "topology": the topology manager's cost at admission.

1,000 one-device pods on 8 NUMA nodes x 125 devices, admitted one after another as the node daemon does,
under `single-numa-node` (device hints for 255 masks, merge, filter, store, NUMA-ordered pick) and under
`none` (no hints). The target: the aligned rate within 20% of the unaligned one.

Both nodes run side by side and take turns, one pod each: every admission waits for its checkpoint's
fsync, whose latency swings with whatever else the machine does, and taking turns gives both policies the
same swings (separate runs differed by up to 2x from one minute to the next).
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack

from bench.admission import one_device_pods
from bench.common import Figures, Scale, Target, admitting_node, short_tempdir
from kubedevice.node.admission import admit

NAME = "topology"
NUMA_NODES = 8
POLICIES = ("none", "single-numa-node")


async def measure(pods: int, per_node: int) -> dict[str, float]:
    """Admission rate (pods/s) per policy of `pods` one-device pods; every pod must get its device."""
    spent = dict.fromkeys(POLICIES, 0.0)
    async with AsyncExitStack() as stack:
        nodes = {}
        for policy in POLICIES:
            root = stack.enter_context(short_tempdir())
            nodes[policy] = await stack.enter_async_context(
                admitting_node(root, NUMA_NODES * per_node, policy=policy, numa_count=NUMA_NODES)
            )
        for pod in one_device_pods(pods):
            for policy, (tm, manager) in nodes.items():
                started = time.perf_counter()
                await admit(tm, manager, pod)
                spent[policy] += time.perf_counter() - started
        for policy, (_tm, manager) in nodes.items():
            if len(manager.pod_uids()) != pods:
                raise RuntimeError(f"{policy}: {len(manager.pod_uids())} of {pods} pods hold devices")
    return {policy: pods / seconds for policy, seconds in spent.items()}


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    per_node = 2 if quick else 125
    pods = NUMA_NODES * per_node
    rates: dict[str, list[float]] = {policy: [] for policy in POLICIES}
    ratios: list[float] = []
    for _ in range(runs):
        measured = await measure(pods, per_node)
        for policy, rate in measured.items():
            rates[policy].append(rate)
        ratios.append(measured["single-numa-node"] / measured["none"])
    for policy, samples in rates.items():
        for rate in samples:
            figures.add(
                f"{pods:,} pods, {NUMA_NODES} NUMA x {per_node} devices, {policy}: rate", rate, "pods/s"
            )
    for ratio in ratios:
        figures.add(
            "single-numa-node / none",
            ratio,
            "x",
            target=Target(0.8, "higher") if not quick else None,
            note="within 20%: at least 0.8",
        )
    return figures
