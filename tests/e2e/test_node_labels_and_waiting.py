"""The daemon's node labels and why a pod waits, with one real daemon (`--node-labels example.com/zone=a`):
a slice whose nodeSelector matches the labels is used, one that does not is ignored with its warning, the
labels show in `status`; a Pending pod carries the explanation in `pods --json` and under the `pods`
table; and `kubedevice allocate` on the daemon's folders explains it the same way."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node_dra_helpers import GPU_CLASS, DRANodeProcesses, claim_yaml, pod_yaml
from tests.node_helpers import CLI, run_cli, short_tmpdir, wait_for

ZONE = "example.com/zone"
LABELS = {"example.com/zone": "a", "kubernetes.io/hostname": "node-1"}


def zone_slice(zone: str, *devices: str) -> str:
    listed = "".join(f"  - {{name: {d}}}\n" for d in devices)
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: zone-{zone}}}\n"
        "spec:\n  driver: gpu.example.com\n"
        f"  nodeSelector:\n    nodeSelectorTerms:\n    - matchExpressions:\n"
        f"      - {{key: {ZONE}, operator: In, values: [{zone}]}}\n"
        f"  pool: {{name: zone-{zone}, generation: 1, resourceSliceCount: 1}}\n  devices:\n{listed}"
    )


def three_gpus() -> str:
    return claim_yaml("three", None).replace(
        "exactly: {deviceClassName: gpu}", "exactly: {deviceClassName: gpu, count: 3}"
    )


@pytest.fixture(scope="module")
def node() -> Iterator[DRANodeProcesses]:
    procs = DRANodeProcesses(short_tmpdir("kd-labels-"))
    try:
        procs.start_daemon("--node-labels", f"{ZONE}=a")
        folder = procs.paths.resourceslices
        (folder / ".slices.tmp").write_text(
            zone_slice("a", "gpu-0", "gpu-1") + "---\n" + zone_slice("b", "gpu-9")
        )
        (folder / ".slices.tmp").rename(folder / "slices.yaml")
        procs.write_manifest(
            "one.yaml", f"{GPU_CLASS}---\n{claim_yaml('one', None)}---\n{pod_yaml('uses-one', 'one')}"
        )

        def allocated() -> Any:
            claim = procs.claim("one")
            return claim if claim is not None and claim.get("allocation") else None

        wait_for(allocated, "claim one to be allocated")
        procs.write_manifest("three.yaml", f"{three_gpus()}---\n{pod_yaml('waits-for-three', 'three')}")
        wait_for(lambda: (procs.pod("waits-for-three") or {}).get("waiting"), "waits-for-three to wait")
        yield procs
    finally:
        procs.close()


def cli(node: DRANodeProcesses, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_labels_are_shown_by_status(node: DRANodeProcesses) -> None:
    status = cli(node, "status", "--root-dir", str(node.root), "--json")
    assert json.loads(status.stdout)["nodeLabels"] == LABELS
    table = cli(node, "status", "--root-dir", str(node.root))
    assert "DRA node name: node-1 (labels: example.com/zone=a, kubernetes.io/hostname=node-1)" in table.stdout


def test_a_matching_slice_is_used_and_another_ignored_with_its_warning(node: DRANodeProcesses) -> None:
    slices = {s["name"]: s["error"] for s in node.try_status("/resourceslices")["resourceSlices"]}
    assert slices["zone-a"] is None
    assert slices["zone-b"] == (
        'ResourceSlice zone-b: its spec.nodeSelector does not match node "node-1" '
        "(labels: example.com/zone=a,kubernetes.io/hostname=node-1); ignored"
    )
    claim = node.claim("one")
    assert claim is not None
    results = claim["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [("zone-a", "gpu-0")]


WAITING = {
    "claim": "default/three",
    "request": "gpu",
    "wanted": 3,
    "candidates": 2,
    "fit": 1,
    "allocationMode": "ExactCount",
    "ruledOut": [
        {
            "rule": "in use",
            "count": 1,
            "first": "gpu.example.com/zone-a/gpu-0",
            "detail": "held by an allocated claim",
        }
    ],
    "text": 'default/three, request "gpu": 3 wanted, 1 of 2 fit; '
    "in use: 1 (first: gpu.example.com/zone-a/gpu-0, held by an allocated claim)",
}


def test_a_pending_pod_says_why_it_waits(node: DRANodeProcesses) -> None:
    pods = json.loads(cli(node, "pods", "--root-dir", str(node.root), "--json").stdout)["pods"]
    (pod,) = [p for p in pods if p["name"] == "waits-for-three"]
    assert (pod["phase"], pod["reason"]) == ("Pending", "Unschedulable")
    assert pod["message"] == (
        'cannot allocate all claims: ResourceClaim default/three, request "gpu": '
        "3 matching device(s) wanted, 1 free"
    )
    assert pod["waiting"] == {"reason": "Unschedulable", "requests": [WAITING]}
    (other,) = [p for p in pods if p["name"] == "uses-one"]
    assert other["waiting"] is None  # it waits for its driver, not for an allocation
    table = cli(node, "pods", "--root-dir", str(node.root)).stdout
    assert f"default/waits-for-three waits: {WAITING['text']}" in table


def test_allocate_on_the_daemons_folders_explains_it_the_same(node: DRANodeProcesses) -> None:
    done = cli(
        node,
        "allocate",
        "--root-dir",
        str(node.root),
        "--node",
        "node-1",
        "--node-labels",
        f"{ZONE}=a",
        "--json",
    )
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)
    assert answer["node"] == {"name": "node-1", "labels": LABELS}
    claims = {c["name"]: (c["allocatedBefore"], c["allocation"] is not None) for c in answer["claims"]}
    assert claims == {"one": (True, True), "three": (False, False)}
    assert answer["unschedulable"]["requests"] == [WAITING]
    assert answer["warnings"] == [
        'ResourceSlice zone-b: its spec.nodeSelector does not match node "node-1" '
        "(labels: example.com/zone=a,kubernetes.io/hostname=node-1); ignored"
    ]


def test_bad_node_labels_are_one_line_and_exit_2() -> None:
    done = run_cli("node", "--root-dir", "/nonexistent/kd", "--node-labels", "example.com/zone=a b")
    assert done.returncode == 2
    assert done.stderr == (
        "error: node: --node-labels: 'a b' is not a label value (at most 63 letters, digits, '-', '_' "
        "and '.', beginning and ending with a letter or digit) — write KEY=VALUE,KEY=VALUE with label keys "
        "and values\n"
    )
