"""`kubedevice demo` runs its stories end to end, exits 0 and leaves nothing behind."""

from __future__ import annotations

import glob

from tests.node_helpers import run_cli


def test_demo_plays_every_story_and_cleans_up() -> None:
    before = set(glob.glob("/tmp/kubedevice-demo-*"))
    result = run_cli("demo", timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for step in (
        "both plugins registered",
        "trainer is Running with its GPU and NIC on one NUMA node",
        "wide is Failed (TopologyAffinityError)",
        "trainer kept its devices and NUMA hint from the checkpoint",
        "capacity returned",
        "allocatable 0, capacity kept",
        "the resource left capacity",
        "capacity and allocatable are back",
        "best-effort admits wide across both NUMA nodes",
        "demo finished",
    ):
        assert step in result.stdout, step
    assert set(glob.glob("/tmp/kubedevice-demo-*")) == before
