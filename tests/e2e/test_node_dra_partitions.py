"""The dra-example-driver-shaped demos of partitionable devices and device taints, through a real daemon
process: a MIG-like pool (two GPUs, each a full-GPU device and two partitions consuming the same shared
counters) allocates partitions until the counters run out and never a full GPU beside one of its
partitions; a tainted device goes to the pod that tolerates the taint while the other waits with a message
naming it; a DeviceTaintRule document taints a device until it is removed.

The driver is a raw DRA plugin (tests/dra_plugin.py) that prepares whatever it is asked; the slices are
files in the daemon's `resourceslices/` folder, as a driver publishes them. One daemon for the module: each
test uses devices of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.dra_plugin import DRATestPlugin
from tests.node_dra_helpers import DRIVER, NODE, DRANodeProcesses, dra_node_processes
from tests.node_helpers import wait_for


def _counters(memory: str, slices: int) -> str:
    return f'{{memory: {{value: {memory}}}, slices: {{value: "{slices}"}}}}'


def _gpu(index: int) -> str:
    full = (
        f"  - name: gpu-{index}\n    attributes: {{profile: {{string: full}}}}\n"
        f"    consumesCounters: [{{counterSet: gpu-{index}, counters: {_counters('40Gi', 2)}}}]\n"
    )
    parts = "".join(
        f"  - name: gpu-{index}-1g-{p}\n    attributes: {{profile: {{string: 1g}}}}\n"
        f"    consumesCounters: [{{counterSet: gpu-{index}, counters: {_counters('20Gi', 1)}}}]\n"
        for p in range(2)
    )
    return full + parts


HEAD = f"""apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {{name}}}}
spec:
  driver: {DRIVER}
  nodeName: {NODE}
  pool: {{name: {NODE}, generation: 1, resourceSliceCount: 2}}
"""
TAINT = "{key: example.com/overheated, value: 'true', effect: NoSchedule}"
SLICES = (
    HEAD.replace("{name}", "node-1-counters")
    + "  sharedCounters:\n"
    + "".join(f"  - {{name: gpu-{i}, counters: {_counters('40Gi', 2)}}}\n" for i in range(2))
    + "---\n"
    + HEAD.replace("{name}", "node-1-devices")
    + "  devices:\n"
    + _gpu(0)
    + _gpu(1)
    + "".join(
        f"  - {{name: hot-{i}, attributes: {{profile: {{string: hot}}}}, taints: [{TAINT}]}}\n"
        for i in range(2)
    )
    + "  - {name: spare-0, attributes: {profile: {string: spare}}}\n"
)
CLASS = f"""apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu}}
spec:
  selectors:
  - cel: {{expression: 'device.driver == "{DRIVER}"'}}
"""
RULE = """apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: maintenance}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1, device: spare-0}
  taint: {key: example.com/maintenance, value: planned, effect: NoExecute}
"""


def claim_and_pod(name: str, profile: str, tolerations: str = "") -> str:
    """A claim of one device of `profile` and a pod using it, both called `name`."""
    selector = f"[{{cel: {{expression: \"device.attributes['{DRIVER}'].profile == '{profile}'\"}}}}]"
    extra = f", tolerations: {tolerations}" if tolerations else ""
    return f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - {{name: gpu, exactly: {{deviceClassName: gpu, selectors: {selector}{extra}}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims: [{{name: gpu, resourceClaimName: {name}}}]
  containers:
  - name: main
    resources: {{claims: [{{name: gpu}}]}}
"""


class PluginThread:
    """The raw DRA plugin served on an event loop of its own thread, for a test written synchronously."""

    def __init__(self, node: DRANodeProcesses) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.plugin = DRATestPlugin(node.root / "plugins_registry", node.root, driver=DRIVER)
        self._run(self.plugin.start())

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def stop(self) -> None:
        self._run(self.plugin.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)


@pytest.fixture(scope="module")
def node() -> Iterator[DRANodeProcesses]:
    for procs in dra_node_processes():
        yield from _started(procs)


def _started(procs: DRANodeProcesses) -> Iterator[DRANodeProcesses]:
    procs.start_daemon()
    plugin = PluginThread(procs)
    try:
        wait_for(procs.endpoints, f"{DRIVER} to register")
        procs.paths.resourceslices.mkdir(parents=True, exist_ok=True)
        tmp = procs.paths.resourceslices / ".mig.yaml.tmp"
        tmp.write_text(SLICES)
        tmp.replace(procs.paths.resourceslices / "mig.yaml")
        wait_for(lambda: len(procs.driver_devices() or ()) == 9, "the slices to be read")
        procs.write_manifest("class.yaml", CLASS)
        yield procs
    finally:
        plugin.stop()


def _device(node: DRANodeProcesses, claim: str) -> str | None:
    found = node.try_status(f"/claims/default/{claim}")
    allocation = (found or {}).get("status", {}).get("allocation")
    return None if allocation is None else str(allocation["devices"]["results"][0]["device"])


def _phases(node: DRANodeProcesses, names: list[str]) -> dict[str, str] | None:
    pods = {p["name"]: p for p in node.pods()}
    if any(n not in pods or pods[n]["phase"] not in ("Running", "Pending") for n in names):
        return None
    return {n: pods[n]["phase"] for n in names}


def test_partitions_until_the_shared_counters_run_out_never_a_full_gpu_beside_one(
    node: DRANodeProcesses,
) -> None:
    parts = [f"part-{i}" for i in range(5)]
    for name in parts:
        node.write_manifest(f"{name}.yaml", claim_and_pod(name, "1g"))

    def four_running() -> dict[str, str] | None:
        phases = _phases(node, parts)
        return phases if phases and list(phases.values()).count("Running") == 4 else None

    phases = wait_for(four_running, "four partitions to run")
    [waiting] = [n for n, phase in phases.items() if phase == "Pending"]
    pod = node.wait_message(waiting, "cannot allocate all claims")
    assert pod["message"] == (
        f'cannot allocate all claims: ResourceClaim default/{waiting}, request "gpu": '
        "1 matching device(s) wanted, 0 free"
    )
    running = {n: _device(node, n) for n, phase in phases.items() if phase == "Running"}
    assert sorted(running.values()) == ["gpu-0-1g-0", "gpu-0-1g-1", "gpu-1-1g-0", "gpu-1-1g-1"]
    (node.paths.manifests / f"{waiting}.yaml").unlink()

    # Every GPU has partitions taken: the full GPUs' counters are used up, so the full pod waits.
    node.write_manifest("full.yaml", claim_and_pod("full", "full"))
    pod = node.wait_message("full", "cannot allocate all claims")
    assert pod["message"] == (
        'cannot allocate all claims: ResourceClaim default/full, request "gpu": 1 matching device(s) wanted, '
        f"0 free; {DRIVER}/{NODE}/gpu-0: the shared counters it consumes are used up"
    )
    # The partitions of gpu-0 go: the full gpu-0 is free again, never beside a partition of its own.
    for name, device in running.items():
        if device is not None and device.startswith("gpu-0-"):
            (node.paths.manifests / f"{name}.yaml").unlink()
    node.wait_phase("full", "Running")
    assert _device(node, "full") == "gpu-0"
    held = [_device(node, n) for n in running if (node.paths.manifests / f"{n}.yaml").exists()]
    assert sorted(d for d in held if d is not None) == ["gpu-1-1g-0", "gpu-1-1g-1"]


def test_a_tainted_device_goes_to_the_pod_that_tolerates_it(node: DRANodeProcesses) -> None:
    tolerate = "[{key: example.com/overheated, operator: Exists, effect: NoSchedule}]"
    node.write_manifest("hot-no.yaml", claim_and_pod("hot-no", "hot"))
    node.write_manifest("hot-yes.yaml", claim_and_pod("hot-yes", "hot", tolerate))
    node.wait_phase("hot-yes", "Running")
    pod = node.wait_message("hot-no", "has the taint")
    assert pod["phase"] == "Pending"
    assert (
        "has the taint example.com/overheated=true:NoSchedule, which the request does not tolerate"
        in (pod["message"])
    )
    claim = node.try_status("/claims/default/hot-yes")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["tolerations"] == [
        {"key": "example.com/overheated", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == result["tolerations"]


def test_a_device_taint_rule_taints_a_device_until_it_is_removed(node: DRANodeProcesses) -> None:
    rule = node.write_manifest("rule.yaml", RULE)
    node.write_manifest("spare.yaml", claim_and_pod("spare", "spare"))
    pod = node.wait_message("spare", "has the taint")
    assert pod["phase"] == "Pending" and pod["message"].endswith(
        f"; {DRIVER}/{NODE}/spare-0 has the taint example.com/maintenance=planned:NoExecute, which the "
        "request does not tolerate"
    )
    rule.unlink()
    node.wait_phase("spare", "Running")
    assert _device(node, "spare") == "spare-0"
