"""Consumable capacity through a real daemon, shaped like the dra-example-driver's demo: one GPU with
allowMultipleAllocations and 40Gi of memory under a validRange policy (min 10Gi, step 10Gi). Pods share it
until its memory is used, each prepared with its own shareID; the next one waits Unschedulable with the
reason, and runs once a share is released. `kubedevice claims --json` shows each share's consumedCapacity
and shareID.

The fake driver publishes its own slice of pool node-1 (gpu-0, not shared); the slice written here
replaces it for the allocator with a newer generation of the same pool, so the driver prepares the
shares (it accepts any device of its pool).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node_dra_helpers import NODE, DRANodeProcesses, dra_node_processes, pod_yaml
from tests.node_helpers import CLI, wait_for

SHARED_GPU = f"""apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {NODE}-shared-gpu}}
spec:
  driver: gpu.example.com
  nodeName: {NODE}
  pool: {{name: {NODE}, generation: 1000000, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    allowMultipleAllocations: true
    capacity:
      memory:
        value: 40Gi
        requestPolicy:
          default: 10Gi
          validRange: {{min: 10Gi, step: 10Gi}}
"""
SHARED_CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: shared-gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com" && device.allowMultipleAllocations'}
"""
WAITS = (
    'cannot allocate all claims: ResourceClaim default/big, request "gpu": '
    "1 matching device(s) wanted, 0 free"
)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def claim(name: str, memory: str | None) -> str:
    capacity = f", capacity: {{requests: {{memory: {memory}}}}}" if memory else ""
    return f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: shared-gpu{capacity}}}
"""


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def _claims(node: DRANodeProcesses) -> dict[str, Any]:
    out = subprocess.run(
        [*CLI, "claims", "--json", "--root-dir", str(node.root)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return {c["name"]: c for c in json.loads(out.stdout)["claims"]}


def test_pods_share_a_gpu_until_its_memory_is_used(node: DRANodeProcesses) -> None:
    node.start_daemon()
    node.start_dra_plugin(devices=1)
    (node.paths.resourceslices / "shared-gpu.yaml").write_text(SHARED_GPU)
    claims = [SHARED_CLASS, claim("small", "15Gi"), claim("plain", None), claim("half", "10Gi")]
    node.write_manifest("claims.yaml", "---\n".join([*claims, claim("big", "20Gi")]))
    for name in ("small", "plain", "half"):
        node.write_manifest(f"{name}.yaml", pod_yaml(name, name))
    for name in ("small", "plain", "half"):
        node.wait_phase(name, "Running")
    node.write_manifest("big.yaml", pod_yaml("big", "big"))

    pod = node.wait_message("big", WAITS)
    assert (pod["phase"], pod["reason"]) == ("Pending", "Unschedulable")
    shares = _claims(node)
    consumed: dict[str, Any] = {}
    for name in ("small", "plain", "half"):
        [result] = shares[name]["allocation"]["devices"]["results"]
        [prepared] = shares[name]["devices"]
        assert (result["device"], prepared["device"]) == ("gpu-0", "gpu-0")
        assert UUID.fullmatch(result["shareID"]) and prepared["shareID"] == result["shareID"]
        consumed[name] = result["consumedCapacity"]
    # 15Gi went up a step; no request took the default; 40Gi in all
    assert consumed == {"small": {"memory": "20Gi"}, "plain": {"memory": "10Gi"}, "half": {"memory": "10Gi"}}
    share_ids = {shares[n]["allocation"]["devices"]["results"][0]["shareID"] for n in consumed}
    assert len(share_ids) == 3
    assert len(node.events("prepare")) == 3

    # a share released (its pod gone, the claim deallocated): the waiting pod gets the memory
    (node.paths.manifests / "small.yaml").unlink()
    node.wait_phase("big", "Running")
    wait_for(lambda: _claims(node)["small"]["allocation"] is None, "claim small to be deallocated")
    [result] = _claims(node)["big"]["allocation"]["devices"]["results"]
    assert (result["device"], result["consumedCapacity"]) == ("gpu-0", {"memory": "20Gi"})
