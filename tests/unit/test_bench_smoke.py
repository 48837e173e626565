"""The bench harness must not rot: its fixtures are right and its scenarios run end to end at tiny sizes.

No timing is asserted here; speed is measured by `python -m bench`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import (
    admission,
    cli_startup,
    daemon_dra,
    dra_allocator,
    exporter,
    listwatch,
    memory,
    pod_latency,
    reregistration,
    topology,
)
from bench.common import RESOURCE, Figures, Scale, Target, device_id, list_and_watch_bytes, short_tempdir
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint import CheckpointStore

REPO = Path(__file__).resolve().parents[2]


def test_hand_encoded_snapshot_parses_to_the_devices_it_describes() -> None:
    raw = list_and_watch_bytes(10, unhealthy=[3, 7])
    msg = dp.ListAndWatchResponse.FromString(raw)
    expected = dp.ListAndWatchResponse()
    for i in range(10):
        d = expected.devices.add(ID=device_id(i), health="Unhealthy" if i in (3, 7) else "Healthy")
        d.topology.nodes.add(ID=0 if i < 5 else 1)
    assert msg == expected
    # Byte-identical to what protobuf itself would send, so the manager sees an ordinary message.
    assert raw == expected.SerializeToString()


def test_window_cost_is_the_mean_of_the_window() -> None:
    done = [1.0, 2.0, 4.0, 8.0]
    assert admission.window_cost(done, 0, 2) == 1.0
    assert admission.window_cost(done, 2, 4) == 3.0


def test_percentile_is_the_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 201)]
    assert pod_latency.percentile(samples, 0.99) == 198.0
    assert pod_latency.percentile(samples, 0.5) == 100.0
    assert pod_latency.percentile([3.0], 0.99) == 3.0


async def test_latency_scenario_follows_the_daemons_log_to_every_pod_running() -> None:
    figures = {f.name: f for f in await pod_latency.run(scale=Scale.QUICK, runs=1)}
    assert set(figures) == {
        "one manifest to Running (10 one at a time): median",
        "one manifest to Running (10 one at a time): p99",
        "8 pods on 2 resources x 4 devices: all Running",
    }
    assert all(len(f.samples) == 1 and f.median > 0 for f in figures.values())


def test_targets_compare_in_the_right_direction() -> None:
    assert Target(0.5).met(0.4) and not Target(0.5).met(0.5)
    assert Target(500, "higher").met(500) and not Target(500, "higher").met(499)
    figures = Figures("x")
    figures.add("f", 3.0, "s", target=Target(2.0))
    figures.add("f", 1.0, "s")
    figures.add("f", 1.5, "s")
    (figure,) = figures
    assert figure.median == 1.5 and figure.met is True
    assert figure.to_json()["min"] == 1.0 and figure.to_json()["max"] == 3.0


async def test_listwatch_applies_and_flips_through_a_real_manager() -> None:
    snapshot = list_and_watch_bytes(200)
    flipped = list_and_watch_bytes(200, range(0, 200, 100))
    applied, flip = await listwatch.measure_once(200, snapshot, flipped, 2)
    assert applied > 0 and flip > 0


async def test_admission_admits_every_pod_and_checkpoints_them() -> None:
    with short_tempdir() as root:
        from bench.common import admitting_node

        async with admitting_node(root, 12) as (tm, manager):
            done = await admission.admit_all(tm, manager, admission.one_device_pods(12), inflight=4)
            assert len(done) == 12 and done == sorted(done)
            assert len(manager.pod_uids()) == 12
            saved = CheckpointStore(root / "dp").read().data
            assert saved.pod_device_entries is not None
            assert {e.pod_uid for e in saved.pod_device_entries} == manager.pod_uids()
            assert {e.resource_name for e in saved.pod_device_entries} == {RESOURCE}


async def test_topology_scenario_admits_under_both_policies() -> None:
    figures = {f.name: f for f in await topology.run(scale=Scale.QUICK, runs=1)}
    assert set(figures) == {
        "16 pods, 8 NUMA x 2 devices, none: rate",
        "16 pods, 8 NUMA x 2 devices, single-numa-node: rate",
        "single-numa-node / none",
    }
    assert all(f.median > 0 for f in figures.values())


def test_devices_spread_over_numa_nodes_in_blocks() -> None:
    msg = dp.ListAndWatchResponse.FromString(list_and_watch_bytes(16, numa_count=8))
    assert [d.topology.nodes[0].ID for d in msg.devices] == [i // 2 for i in range(16)]


async def test_exporter_scenario_measures_a_real_exporter_at_tiny_size() -> None:
    figures = {f.name: f for f in await exporter.run(scale=Scale.QUICK, runs=1)}
    refresh = figures["one refresh, 200 containers (checkpoint changed)"]
    assert len(refresh.samples) == exporter.REFRESHES and all(s > 0 for s in refresh.samples)
    assert len(figures["one scrape, 200 containers"].samples) == exporter.REFRESHES
    [rss] = figures["exporter peak RSS, 200 containers"].samples
    assert rss > 10  # MB: a Python process with gRPC loaded, not a unit mix-up


def test_quick_run_as_a_process_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "listwatch", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    names = {f["name"] for f in results["figures"]}
    assert {"apply 100 devices", "flip 1% of 1,000"} <= names
    assert all(f["scenario"] == "listwatch" and len(f["samples"]) == 1 for f in results["figures"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runs", "0"], "--runs must be at least 1"),
        (["--only", "nope"], "invalid choice: 'nope'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


async def test_cli_startup_scenario_times_each_command_as_a_process() -> None:
    figures = {f.name: f for f in await cli_startup.run(scale=Scale.QUICK, runs=1)}
    assert set(figures) == {"kubedevice --help", "kubedevice --version", "kubedevice status (no daemon)"}
    assert all(len(f.samples) == 1 and f.median > 0 for f in figures.values())
    assert figures["kubedevice --help"].target is not None  # the start-up goal is judged, not asserted


async def test_dra_allocator_scenario_allocates_every_pod_at_tiny_size() -> None:
    figures = {f.name: f for f in await dra_allocator.run(scale=Scale.QUICK, runs=1)}
    rate = next(f for name, f in figures.items() if name.endswith(": rate"))
    assert rate.median > 0
    assert any(name.startswith("RSS growth") for name in figures)
    assert figures["first evaluation of a selector on a device"].median > 0


async def test_daemon_dra_scenario_runs_claim_pods_beside_device_plugin_pods_at_tiny_size() -> None:
    figures = {f.name: f for f in await daemon_dra.run(scale=Scale.QUICK, runs=1)}
    assert set(figures) == {
        "20 claim pods to Running",
        "20 claim pods: rate",
        "20 claim pods: per pod",
        "20 device-plugin pods: rate",
        "20 pods: claim rate / device-plugin rate",
        "20 pods sharing 16 devices by capacity to Running",
        "20 pods sharing 16 devices by capacity: rate",
        "20 pods sharing 16 devices by capacity: per pod",
        "20 pods sharing 16 devices by capacity: rate / one-claim-per-device rate",
    }
    assert all(len(f.samples) == 1 and f.median > 0 for f in figures.values())


def test_make_bench_is_the_short_run_the_readme_describes() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "\nbench: $(STAMP)\n\t$(BIN)/python -m bench\n" in makefile
    assert "\nbench-full: $(STAMP)\n\t$(BIN)/python -m bench --full\n" in makefile
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`make bench` (`python -m bench`) runs every scenario once at the sizes" in readme
    assert (
        "`make bench-full` (`python -m bench --full`) adds the scale targets and three runs per figure"
        in readme
    )
    short, full = Scale.SHORT, Scale.FULL
    assert (short.runs, full.runs) == (1, 3)
    # What the short run leaves out, as the README says it, from the sizes the scenarios run.
    most, fewer = max(listwatch.SIZES[full]), max(listwatch.SIZES[short])
    assert f"ListAndWatch up to {most:,} devices (`make bench`: {fewer:,})" in readme
    assert admission.SIZES[short] == (1_000, None) and admission.SIZES[full][0] == 1_000
    assert f"{admission.SIZES[full][1]:,} pods admitted one by one and 32 at a time (left out)" in readme
    (devices, containers), (some, few) = memory.SIZES[full], memory.SIZES[short]
    assert f"memory with {devices:,} devices and {containers:,} containers ({some:,} and {few:,})" in readme
    assert (
        f"{reregistration.SIZES[full]} kubelet.sock re-creations per mode ({reregistration.SIZES[short]})"
        in readme
    )
    assert f"{cli_startup.ROUNDS[full]} starts of each command ({cli_startup.ROUNDS[short]})" in readme
