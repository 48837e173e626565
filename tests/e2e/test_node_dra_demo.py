"""The daemon's allocator with real processes, on manifests shaped like the dra-example-driver demos: one
file with a Namespace, a DeviceClass, templates, a shared claim, CEL selectors, two requests matching an
attribute, an extended-resource pod, a CEL runtime error and an all-or-nothing pod; a restart keeps every
allocation.

The fake driver publishes gpu-0 .. gpu-9 with `index` i, `numaNode` i % 2, `model` and `memory`; each
claim's selectors pin the devices it may take, so what every pod gets does not depend on which pod the
daemon searched first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node_dra_helpers import DRIVER, DRANodeProcesses, dra_node_processes
from tests.node_helpers import run_cli, wait_for

NS = "gpu-test"


def _index(expression: str) -> str:
    return f"- cel: {{expression: \"device.attributes['gpu.example.com'].index {expression}\"}}"


DEMO = f"""apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu.example.com}}
spec:
  selectors:
  - cel: {{expression: "device.driver == 'gpu.example.com'"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu-4}}
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel: {{expression: "device.driver == 'gpu.example.com'"}}
  {_index("== 4")}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{namespace: {NS}, name: single-gpu}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel: {{expression: "device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'"}}
          {_index("<= 1")}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{namespace: {NS}, name: big-gpus}}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.example.com
          count: 2
          selectors:
          - cel: {{expression: "device.capacity['gpu.example.com'].memory.compareTo(quantity('4Gi')) >= 0"}}
          {_index(">= 6")}
          {_index("<= 7")}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{namespace: {NS}, name: same-numa-pair}}
spec:
  spec:
    devices:
      requests:
      - name: a
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          {_index(">= 3")}
          {_index("<= 5")}
      - name: b
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          {_index(">= 3")}
          {_index("<= 5")}
      constraints:
      - {{requests: [a, b], matchAttribute: gpu.example.com/numaNode}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{namespace: {NS}, name: shared-gpu}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        selectors:
        {_index("== 2")}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{namespace: {NS}, name: missing-attribute}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        selectors:
        {_index(">= 8")}
        - cel: {{expression: "device.attributes['gpu.example.com'].missing == 1"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{namespace: {NS}, name: one-of-two}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        selectors:
        {_index(">= 8")}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{namespace: {NS}, name: two-of-two}}
spec:
  devices:
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.example.com
        count: 2
        selectors:
        {_index(">= 8")}
"""


def _pod(name: str, claims: dict[str, str], containers: dict[str, list[str]], limits: str = "") -> str:
    """A pod in the demo namespace; `claims`: pod claim -> `template:<name>` or `claim:<name>`;
    `containers`: container -> the pod claims it uses."""
    lines = ["---", "apiVersion: v1", "kind: Pod", f"metadata: {{namespace: {NS}, name: {name}}}", "spec:"]
    if claims:
        lines.append("  resourceClaims:")
        for claim, source in claims.items():
            kind, _, target = source.partition(":")
            field = "resourceClaimTemplateName" if kind == "template" else "resourceClaimName"
            lines.append(f"  - {{name: {claim}, {field}: {target}}}")
    lines.append("  containers:")
    for container, used in containers.items():
        lines.append(f"  - name: {container}")
        lines.append("    resources:")
        if used:
            lines.append(f"      claims: [{', '.join('{name: ' + u + '}' for u in used)}]")
        if limits:
            lines.append(f"      limits: {{{limits}}}")
    return "\n".join(lines) + "\n"


PODS = "".join(
    [
        # gpu-test1: two pods, each its own claim from one template.
        _pod("pod0", {"gpu": "template:single-gpu"}, {"ctr0": ["gpu"]}),
        # gpu-test2: one claim shared by two containers of a pod.
        _pod("pod1", {"shared": "template:single-gpu"}, {"ctr0": ["shared"], "ctr1": ["shared"]}),
        # gpu-test3: one claim shared by two pods.
        _pod("pod2a", {"gpu": "claim:shared-gpu"}, {"ctr0": ["gpu"]}),
        _pod("pod2b", {"gpu": "claim:shared-gpu"}, {"ctr0": ["gpu"]}),
        _pod("pod3", {"gpus": "template:big-gpus"}, {"ctr0": ["gpus"]}),
        _pod("pod4", {"pair": "template:same-numa-pair"}, {"ctr0": ["pair"]}),
        _pod("pod5", {}, {"ctr0": []}, limits="example.com/gpu: 1"),
        _pod("bad-cel", {"gpu": "claim:missing-attribute"}, {"ctr0": ["gpu"]}),
        _pod("greedy", {"one": "claim:one-of-two", "two": "claim:two-of-two"}, {"ctr0": ["one", "two"]}),
    ]
)
RUNNING = ("pod0", "pod1", "pod2a", "pod2b", "pod3", "pod4", "pod5")
# gpu-8 is the first device it reaches: the all-or-nothing pod takes none.
CEL_ERROR = (
    f"claim {NS}/missing-attribute: selector #1 on device {DRIVER}/node-1/gpu-8: "
    "CEL runtime error: no such key: missing"
)
ALL_OR_NOTHING = (
    "cannot allocate all claims: no combination of free devices satisfies every request and constraint"
)


FLAGS = ("--numa-nodes", "2", "--capacity", "memory=8Gi", "--attribute", "model=LATEST-GPU-MODEL")


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def _cdi(*indexes: int) -> list[str]:
    return [f"{DRIVER}/gpu=gpu-{i}" for i in indexes]


def _allocations(node: DRANodeProcesses) -> dict[str, list[str]]:
    """namespace/name -> the devices allocated, for every claim the daemon shows."""
    claims = node.try_status("/claims")["claims"]
    return {
        f"{c['namespace']}/{c['name']}": [r["device"] for r in c["allocation"]["devices"]["results"]]
        if c["allocation"]
        else []
        for c in claims
    }


def _check_pods(node: DRANodeProcesses) -> dict[str, dict[str, Any]]:
    pods = {name: node.wait_phase(name, "Running") for name in RUNNING}
    cdi = {name: [c["cdiDevices"] for c in pod["containers"]] for name, pod in pods.items()}
    # pod0 and pod1 take gpu-0 and gpu-1, one each, whichever the daemon searched first.
    assert sorted([cdi["pod0"][0], cdi["pod1"][0]]) == [_cdi(0), _cdi(1)]
    assert cdi["pod1"][0] == cdi["pod1"][1]
    assert cdi["pod2a"] == cdi["pod2b"] == [_cdi(2)]
    assert cdi["pod3"] == [_cdi(6, 7)]
    # a takes gpu-3 (NUMA node 1); gpu-4 is on node 0, so b takes gpu-5.
    assert cdi["pod4"] == [_cdi(3, 5)]
    assert cdi["pod5"] == [_cdi(4)]
    return pods


def test_demo_manifests_get_the_devices_upstream_gives_and_keep_them_across_a_restart(
    node: DRANodeProcesses,
) -> None:
    node.start_daemon()
    node.start_dra_plugin(DRIVER, 10, *FLAGS)
    node.write_manifest("demo.yaml", DEMO + PODS)
    pods = _check_pods(node)
    pod4 = pods["pod4"]
    (pair,) = pod4["resourceClaims"]
    pair_claim = node.try_status(f"/claims/{NS}/{pair['resourceClaimName']}")
    results = pair_claim["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["device"]) for r in results] == [("a", "gpu-3"), ("b", "gpu-5")]
    # The shared claim: prepared once for both pods.
    prepared = [e["claim"] for e in node.events("prepare")]
    assert prepared.count(f"{NS}/shared-gpu") == 1
    generated = [
        c["resourceClaimName"] for n in ("pod0", "pod1", "pod3", "pod4") for c in pods[n]["resourceClaims"]
    ]
    special = pods["pod5"]["extendedResourceClaimStatus"]["resourceClaimName"]
    assert sorted(prepared) == sorted(f"{NS}/{c}" for c in [*generated, "shared-gpu", special])

    bad = node.wait_message("bad-cel", CEL_ERROR)
    assert (bad["phase"], bad["reason"]) == ("Pending", "Unschedulable")
    assert bad["message"].startswith(CEL_ERROR + ". consider using CEL optional chaining")
    greedy = node.wait_message("greedy", ALL_OR_NOTHING)
    assert (greedy["phase"], greedy["reason"]) == ("Pending", "Unschedulable")
    before = _allocations(node)
    assert before[f"{NS}/one-of-two"] == before[f"{NS}/two-of-two"] == []
    assert before[f"{NS}/missing-attribute"] == []
    # Why a pod waits: its reason in the pod list, its message in one line of the log.
    table = run_cli("pods", "--root-dir", str(node.root)).stdout
    assert [line for line in table.splitlines() if "greedy" in line and "Unschedulable:" in line]
    log = (node.root / "daemon.log").read_text()
    assert f"pod {NS}/bad-cel ({bad['uid']}) waits: {bad['message']}\n" in log
    assert f"pod {NS}/greedy ({greedy['uid']}) waits: {ALL_OR_NOTHING}\n" in log

    # A restart keeps every allocation (dra_claims.json), with no prepare call.
    state = json.loads((node.root / "dra_claims.json").read_text())["claims"]
    assert node.kill_daemon(2) == 0
    node.start_daemon()
    _check_pods(node)
    wait_for(node.driver_devices, "the plugin to register with the new daemon")
    assert _allocations(node) == before
    assert node.wait_message("greedy", ALL_OR_NOTHING)["phase"] == "Pending"
    assert len(node.events("prepare")) == len(prepared) and node.events("prepare-cached") == []
    after = json.loads((node.root / "dra_claims.json").read_text())["claims"]
    assert {k: v.get("allocation") for k, v in after.items()} == {
        k: v.get("allocation") for k, v in state.items()
    }

    # Scenario 36's end: a third device with index >= 8 published, both claims are allocated in one search.
    node.stop_dra_plugin()
    node.start_dra_plugin(DRIVER, 11, *FLAGS)
    greedy = node.wait_phase("greedy", "Running")
    # Devices are tried in the order the slice lists them: the driver's order, as the SDK publishes it.
    (published,) = [s["devices"] for s in node.try_status("/resourceslices")["resourceSlices"]]
    order = [d["name"] for d in published]
    assert order == [f"gpu-{i}" for i in range(11)]
    first, second, third = [name for name in order if int(name.split("-")[1]) >= 8]
    assert greedy["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu={d}" for d in (first, second, third)]
    allocations = _allocations(node)
    assert allocations[f"{NS}/one-of-two"] == [first]
    assert allocations[f"{NS}/two-of-two"] == [second, third]
    _check_pods(node)
