"""`kubedevice allocate` as a real process, without a daemon: docs/allocate.md's walk-through prints what
the page shows, a folder's claims are allocated, a pending case is explained (exit 1), bad input is one
line (exit 2), and `--json` has its documented shape."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.node_helpers import CLI, run_cli

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "allocate.md"
#: A sh block of one command, then (after the words between) the text block it prints.
EXAMPLE = re.compile(r"```sh\n(kubedevice allocate [^\n]*)\n```\n(?:(?!```).)*?```text\n(.*?)```", re.DOTALL)
DRIVER = REPO / "examples" / "allocate" / "driver"
BIG = REPO / "examples" / "allocate" / "big-gpus-claim.yaml"


def allocate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "allocate", *args], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_the_walk_through_prints_what_the_page_shows() -> None:
    examples = EXAMPLE.findall(DOC.read_text(encoding="utf-8"))
    assert len(examples) == 3
    codes = []
    for command, shown in examples:
        done = allocate(*shlex.split(command)[2:])
        assert done.stdout == shown, command
        assert done.stderr == "", command
        codes.append(done.returncode)
    assert codes == [0, 1, 1]  # as the page says


def test_a_folder_of_claims_is_allocated_together(tmp_path: Path) -> None:
    (tmp_path / "claims.yaml").write_text(
        "".join(
            f"""---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, namespace: default}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu.example.com, count: {count}}}
"""
            for name, count in (("one", 1), ("three", 3))
        )
    )
    done = allocate(str(DRIVER), str(tmp_path), "--node", "node-1", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["allocated"] is True
    assert [
        (c["name"], [r["device"] for r in c["allocation"]["devices"]["results"]]) for c in answer["claims"]
    ] == [("one", ["gpu-0"]), ("three", ["gpu-1", "gpu-2", "gpu-3"])]


def test_a_claim_allocated_before_holds_its_devices(tmp_path: Path) -> None:
    (tmp_path / "held.yaml").write_text(
        """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: held, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.example.com, pool: node-1, device: gpu-2}
"""
    )
    done = allocate(str(DRIVER), str(BIG), str(tmp_path / "held.yaml"), "--node", "node-1")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[1] == "ResourceClaim default/big-gpus: not allocated"
    assert "in use: 1 (first: gpu.example.com/node-1/gpu-2, held by an allocated claim)" in lines[-1]


def test_node_labels_select_the_slices_for_the_node(tmp_path: Path) -> None:
    text = (DRIVER / "gpus.yaml").read_text()
    (tmp_path / "gpus.yaml").write_text(
        text.replace(
            "nodeName: node-1",
            "nodeSelector:\n    nodeSelectorTerms:\n    - matchExpressions:\n"
            "      - {key: example.com/zone, operator: In, values: [a]}",
        )
    )
    (tmp_path / "claim.yaml").write_text(BIG.read_text().replace("count: 2", "count: 1"))
    there = allocate(str(tmp_path), "--node", "n", "--node-labels", "example.com/zone=a")
    assert there.returncode == 0, there.stderr
    assert there.stdout.splitlines()[0] == (
        "node n (labels: example.com/zone=a, kubernetes.io/hostname=n): 1 pool(s), 4 device(s)"
    )
    elsewhere = allocate(str(tmp_path), "--node", "n", "--node-labels", "example.com/zone=b")
    assert elsewhere.returncode == 1
    assert elsewhere.stderr.startswith(
        "warning: ResourceSlice node-1-gpus: its spec.nodeSelector does not match"
    )


BAD: list[tuple[list[str], str]] = [
    (["/no/such/folder"], "error: allocate: /no/such/folder: no such file or folder — give files or folders"),
    ([str(DRIVER), "--node", "Node_1"], "error: allocate: --node 'Node_1' is not a node name"),
    ([str(DRIVER), "--node-labels", "zone"], "error: allocate: --node-labels: 'zone' is not KEY=VALUE —"),
    (
        [str(DRIVER), "--node", "node-1"],
        "error: allocate: no ResourceClaim without an allocation in the inputs",
    ),
    (
        [str(DRIVER), "--pod", str(DRIVER / "gpus.yaml")],
        f"error: allocate: --pod {DRIVER / 'gpus.yaml'}: has 0 Pods — give a file with one Pod",
    ),
]


@pytest.mark.parametrize(("args", "line"), BAD)
def test_bad_input_is_one_line_and_exit_2(args: list[str], line: str) -> None:
    done = allocate(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(line), done.stderr
    assert done.stderr.count("\n") == 1 and " — " in done.stderr


def test_a_pod_naming_what_the_inputs_lack_is_one_line(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        """apiVersion: v1
kind: Pod
metadata: {name: training}
spec:
  resourceClaims:
  - {name: gpus, resourceClaimTemplateName: two-gpus}
  - {name: other, resourceClaimName: other}
  containers:
  - name: main
"""
    )
    done = allocate(str(DRIVER), "--pod", str(pod), "--node", "node-1")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: allocate: pod default/training: ResourceClaimTemplate default/two-gpus not found "
        "in the inputs — give the file that holds it\n"
    )
    templates = REPO / "examples" / "allocate" / "training-pod.yaml"
    done = allocate(str(DRIVER), str(templates), "--pod", str(pod), "--node", "node-1")
    assert (done.returncode, done.stderr) == (
        2,
        "error: allocate: pod default/training: ResourceClaim default/other is not in the inputs "
        "— give the file that holds it\n",
    )


def test_a_document_the_api_server_would_refuse_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BIG.read_text().replace("count: 2", "count: 0"))
    done = allocate(str(DRIVER), str(bad), "--node", "node-1")
    assert done.returncode == 2
    assert done.stderr == (
        f"error: allocate: {bad}: ResourceClaim default/big-gpus: spec.devices.requests[0].exactly.count: "
        "must be at least 1, not 0 — fix the document (the API server would refuse it too)\n"
    )


def test_the_command_is_listed_with_its_summary() -> None:
    listed = run_cli("--help")
    assert "allocate" in listed.stdout


def test_a_share_allocated_before_consumes_its_capacity(tmp_path: Path) -> None:
    (tmp_path / "shared.yaml").write_text(
        """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, allowMultipleAllocations: true, capacity: {memory: {value: 8Gi}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: first, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, capacity: {requests: {memory: 6Gi}}}
status:
  allocation:
    devices:
      results:
      - request: gpu
        driver: gpu.example.com
        pool: node-1
        device: gpu-0
        shareID: 0b7e6a52-0000-4000-8000-00000000000a
        consumedCapacity: {memory: 6Gi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: second, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, capacity: {requests: {memory: 4Gi}}}
"""
    )
    done = allocate(str(tmp_path), "--node", "node-1")
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1] == (
        '  default/second, request "gpu": 1 wanted, 0 of 1 fit; capacity: 1 '
        "(first: gpu.example.com/node-1/gpu-0, its capacity cannot hold the request "
        "(too little left, or outside its requestPolicy))"
    )
    smaller = tmp_path / "shared.yaml"
    smaller.write_text(smaller.read_text().replace("memory: 4Gi", "memory: 2Gi"))
    fits = allocate(str(tmp_path), "--node", "node-1", "--json")
    assert fits.returncode == 0, fits.stdout
    (_, second) = json.loads(fits.stdout)["claims"]
    assert second["allocation"]["devices"]["results"][0]["consumedCapacity"] == {"memory": "2Gi"}


def test_a_device_taint_rule_taints_the_devices_it_selects(tmp_path: Path) -> None:
    (tmp_path / "rule.yaml").write_text(
        """apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: maintenance}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1, device: gpu-2}
  taint: {key: example.com/maintenance, value: planned, effect: NoSchedule}
"""
    )
    done = allocate(str(DRIVER), str(BIG), str(tmp_path), "--node", "node-1", "--json")
    assert done.returncode == 1, done.stderr
    (request,) = json.loads(done.stdout)["unschedulable"]["requests"]
    assert [(r["rule"], r["count"], r["first"]) for r in request["ruledOut"]] == [
        ("request selector", 2, "gpu.example.com/node-1/gpu-0"),
        ("taint", 1, "gpu.example.com/node-1/gpu-2"),
    ]
    assert "example.com/maintenance=planned:NoSchedule" in request["ruledOut"][1]["detail"]
