"""Scenario "topology": the topology manager's cost at admission.

1,000 one-device pods on 8 NUMA nodes x 125 devices, admitted one after another as the node daemon does,
under `single-numa-node` (device hints for 255 masks, merge, filter, store, NUMA-ordered pick) and under
`none` (no hints). The target: the aligned rate within 20% of the unaligned one.
"""

from __future__ import annotations

from bench.admission import admit_all, one_device_pods
from bench.common import Figures, Target, admitting_node, short_tempdir

NAME = "topology"
NUMA_NODES = 8


async def measure(pods: int, per_node: int, policy: str) -> float:
    """Admission rate (pods/s) of `pods` one-device pods under `policy`; every pod must land aligned."""
    with short_tempdir() as root:
        async with admitting_node(root, NUMA_NODES * per_node, policy=policy, numa_count=NUMA_NODES) as (
            tm,
            manager,
        ):
            done = await admit_all(tm, manager, one_device_pods(pods), 1)
            if len(manager.pod_uids()) != pods:
                raise RuntimeError(f"{len(manager.pod_uids())} of {pods} pods hold devices")
    return pods / done[-1]


async def run(*, quick: bool, runs: int) -> Figures:
    figures = Figures(NAME)
    per_node = 2 if quick else 125
    pods = NUMA_NODES * per_node
    rates: dict[str, list[float]] = {"none": [], "single-numa-node": []}
    for _ in range(runs):
        for policy in rates:
            rates[policy].append(await measure(pods, per_node, policy))
    for policy, samples in rates.items():
        for rate in samples:
            figures.add(
                f"{pods:,} pods, {NUMA_NODES} NUMA x {per_node} devices, {policy}: rate", rate, "pods/s"
            )
    for aligned, plain in zip(rates["single-numa-node"], rates["none"], strict=True):
        figures.add(
            "single-numa-node / none",
            aligned / plain,
            "x",
            target=Target(0.8, "higher") if not quick else None,
            note="within 20%: at least 0.8",
        )
    return figures
