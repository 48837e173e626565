"""The dra-example-driver's demos, unchanged (tests/data/dra-example-driver-demos/, see its README), against
one real daemon and `kubedevice plugin fake` publishing what the example driver's gpu profile publishes for
each demo (driver and class `gpu.example.com`, its chart's DeviceClass): device taints and tolerations
(NoSchedule, NoExecute, tolerations, a configurable eviction time), GPU sharing by consumable capacity
(whole and partitioned GPUs), partitionable devices and binding conditions. Each test asserts what the
demo's README says happens, and where the daemon does otherwise, the difference and why (upstream's
allocator wins over a README). Each demo is cleaned up as its README says (its files deleted), so the
next may reuse its namespace and names.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kubedevice.resource.quantity import parse_quantity
from tests.node_dra_helpers import NODE, DRANodeProcesses, dra_node_processes
from tests.node_helpers import wait_for

DEMOS = Path(__file__).parent.parent / "data" / "dra-example-driver-demos"
DRIVER = "gpu.example.com"
#: The example driver's net profile's driver name (its chart's `--set deviceProfile=net`).
NET_DRIVER = "net.example.com"
#: The example driver's chart's DeviceClass (deployments/helm/.../deviceclass.yaml), its driver name.
DEVICE_CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: {driver}}}
spec:
  selectors:
  - cel: {{expression: "device.driver == '{driver}'"}}
"""
EVICTED = ("DeletionByDeviceTaintManager", "Device Taint manager: deleting due to NoExecute taint")
TAINT = "gpu.example.com/unhealthy=true"
TAINT_DEMOS = "device-taints-tolerations"
#: The taint demos' namespace.
NS = "basic-resourceclaimtemplate"


@pytest.fixture(scope="module")
def node() -> Iterator[DRANodeProcesses]:
    for procs in dra_node_processes():
        procs.start_daemon()
        for driver in (DRIVER, NET_DRIVER):
            procs.write_manifest(f"{driver}-class.yaml", DEVICE_CLASS.format(driver=driver))
        yield procs


@contextmanager
def example_driver(node: DRANodeProcesses, gpus: int, *flags: str, driver: str = DRIVER) -> Iterator[None]:
    """The fake as the example driver (`gpu-<i>` devices, pool = node name), stopped at the end."""
    node.start_dra_plugin(driver, gpus, *flags, "--poll-interval", "0.2")
    try:
        yield
    finally:
        node.stop_dra_plugin(driver)


class Demo:
    """A demo's files, applied one by one into the daemon's manifest folder (as `kubectl apply -f`) and
    deleted at the end in the reverse order (its README's cleanup), waiting for its pods to go."""

    def __init__(self, node: DRANodeProcesses, demo: str, namespace: str) -> None:
        self.node, self.demo, self.namespace = node, demo, namespace
        self.applied: list[Path] = []

    def apply(self, file: str) -> Path:
        text = (DEMOS / self.demo / file).read_text()
        path = self.node.write_manifest(f"{self.demo.replace('/', '--')}--{file}", text)
        self.applied.append(path)
        return path

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in self.node.pods() if p["namespace"] == self.namespace}

    def wait(self, name: str, phase: str) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            pod = self.pods().get(name)
            return pod if pod is not None and pod["phase"] == phase else None

        return wait_for(check, f"pod {self.namespace}/{name} to be {phase}")

    def claims(self) -> dict[str, dict[str, Any]]:
        """The namespace's claims by the pod claim's name (`<pod>-<claim>-<suffix>` → `<pod>`) or own name."""
        claims = (self.node.try_status("/claims") or {"claims": []})["claims"]
        return {c["name"]: c for c in claims if c["namespace"] == self.namespace}

    def devices(self, pod: str) -> list[str]:
        """The devices allocated to the pod's claims."""
        [claim] = [c for n, c in self.claims().items() if n == pod or n.startswith(f"{pod}-")]
        return [r["device"] for r in claim["allocation"]["devices"]["results"]]

    def cleanup(self) -> None:
        for path in reversed(self.applied):
            path.unlink()
        wait_for(lambda: not self.pods(), f"the pods of {self.namespace} to be gone")


@contextmanager
def demo(node: DRANodeProcesses, name: str, namespace: str) -> Iterator[Demo]:
    applied = Demo(node, name, namespace)
    try:
        yield applied
    finally:
        applied.cleanup()


def test_noschedule_keeps_the_running_pod_and_holds_back_a_new_one(node: DRANodeProcesses) -> None:
    # Two GPUs: the new pod is held back by the taint on the free one, not by the one in use.
    with example_driver(node, 2), demo(node, f"{TAINT_DEMOS}/device-taint-pod-noschedule", NS) as run:
        run.apply("1-basic-resourceclaimtemplate.yaml")
        run.apply("2-pod-keeps-running.yaml")
        run.wait("pod-keeps-running", "Running")
        run.apply("3-device-taint-rule.yaml")
        # As shipped, the demo's last file has no apiVersion: rejected as the API server rejects it.
        bad = run.apply("4-pod-not-scheduled.yaml")
        error = wait_for(lambda: node.manifest_errors().get(bad.name), "the manifest error")
        assert "apiVersion" in error, error
        # With it, the pod is not scheduled: the only device has the taint it does not tolerate.
        bad.write_text("apiVersion: v1\n" + bad.read_text())
        pod = node.wait_message("pod-no-schedule", "has the taint")
        assert pod["phase"] == "Pending" and f"gpu-1 has the taint {TAINT}:NoSchedule" in pod["message"]
        assert run.pods()["pod-keeps-running"]["phase"] == "Running"
        assert run.pods()["pod-keeps-running"]["pendingEviction"] is None


def test_noexecute_evicts_the_running_pod(node: DRANodeProcesses) -> None:
    with example_driver(node, 1), demo(node, f"{TAINT_DEMOS}/device-taint-pod-noexecute", NS) as run:
        run.apply("1-basic-resourceclaimtemplate.yaml")
        run.apply("2-pod-to-be-evicted.yaml")
        run.wait("pod-to-be-evicted", "Running")
        assert run.devices("pod-to-be-evicted") == ["gpu-0"]
        run.apply("3-device-taint-rule.yaml")
        pod = run.wait("pod-to-be-evicted", "Failed")
        assert (pod["reason"], pod["message"]) == EVICTED
        # The README has the next pod scheduled, then evicted; upstream's allocator (as the daemon's)
        # allocates no device with a NoExecute taint the request does not tolerate: it stays Pending.
        run.apply("4-pod-no-execute.yaml")
        pod = node.wait_message("pod-no-execute", "has the taint")
        assert pod["phase"] == "Pending" and f"gpu-0 has the taint {TAINT}:NoExecute" in pod["message"]


def test_a_toleration_lets_a_pod_use_a_tainted_device(node: DRANodeProcesses) -> None:
    with example_driver(node, 2), demo(node, f"{TAINT_DEMOS}/device-taint-pod-toleration", NS) as run:
        run.apply("1-device-taint-rule.yaml")
        wait_for(lambda: node.try_status("/resourceslices")["deviceTaintRules"], "the rule to be read")
        run.apply("2-basic-resourceclaimtemplate.yaml")
        run.wait("pod-with-toleration", "Running")
        assert run.devices("pod-with-toleration") == ["gpu-0"]
        # The README has it started, then evicted; the allocator does not give it a device it does not
        # tolerate in the first place (as in the NoExecute demo).
        pod = node.wait_message("pod-without-toleration", "has the taint")
        assert pod["phase"] == "Pending" and f"has the taint {TAINT}:NoExecute" in pod["message"]
        assert run.pods()["pod-with-toleration"]["pendingEviction"] is None


def test_toleration_seconds_set_each_pods_eviction_time(node: DRANodeProcesses) -> None:
    demo_dir = f"{TAINT_DEMOS}/device-taint-configurable-pod-eviction-time"
    with example_driver(node, 3), demo(node, demo_dir, NS) as run:
        run.apply("1-basic-resourceclaimtemplate.yaml")
        names = ("pod-no-toleration", "pod-with-toleration", "pod-with-300s-toleration")
        for name in names:
            run.wait(name, "Running")
        assert sorted(d for n in names for d in run.devices(n)) == ["gpu-0", "gpu-1", "gpu-2"]
        run.apply("2-device-taint-rule.yaml")
        pod = run.wait("pod-no-toleration", "Failed")
        assert (pod["reason"], pod["message"]) == EVICTED
        # The 300 s pod is due 300 s after the rule was first seen (not waited for here), the other never.
        pending = wait_for(lambda: run.pods()["pod-with-300s-toleration"]["pendingEviction"], "the countdown")
        assert pending["taints"] == [
            f"{TAINT}:NoExecute of DeviceTaintRule example on {DRIVER}/{NODE}/"
            + run.devices("pod-with-300s-toleration")[0]
        ]
        [rule] = node.try_status("/resourceslices")["deviceTaintRules"]
        added = rule["status"]["conditions"][0]["lastTransitionTime"]
        assert seconds_between(added, pending["at"]) == pytest.approx(300, abs=2)
        assert run.pods()["pod-with-toleration"]["pendingEviction"] is None
        # The README's step 5: the rule's status says one pod is still to go, one gone.
        condition = rule["status"]["conditions"][0]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "EvictionInProgress",
            "True",
            "PodsPendingEviction",
        )
        assert condition["message"] == (
            "1 pod needs to be evicted in 1 namespace. 1 pod evicted since starting the controller."
        )


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def test_binding_conditions_are_met_then_the_pod_runs(node: DRANodeProcesses) -> None:
    with (
        example_driver(node, 1, "--binding-delay", "0.3"),
        demo(node, "binding-conditions", "binding-conditions") as run,
    ):
        run.apply("binding-conditions.yaml")
        run.wait("pod0", "Running")
        [claim] = run.claims().values()
        [result] = claim["allocation"]["devices"]["results"]
        fields = ("bindingConditions", "bindingFailureConditions", "device", "pool")
        assert {k: result[k] for k in fields} == {
            "bindingConditions": ["BindingConditions"],
            "bindingFailureConditions": ["BindingFailureConditions"],
            "device": "gpu-0",
            "pool": NODE,
        }
        [entry] = claim["statusDevices"]
        [condition] = entry["conditions"]
        assert (entry["driver"], entry["pool"], entry["device"]) == (DRIVER, NODE, "gpu-0")
        assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
            "type": "BindingConditions",
            "status": "True",
            "reason": "Ready",
            "message": "Device is ready",
        }


def shares(run: Demo) -> list[tuple[str, dict[str, str], str]]:
    """Each claim's (device, consumed capacity, shareID), by claim name."""
    out = []
    for _, claim in sorted(run.claims().items()):
        [result] = claim["allocation"]["devices"]["results"]
        out.append((result["device"], result["consumedCapacity"], result["shareID"]))
    return out


def test_two_pods_share_one_gpu_by_capacity(node: DRANodeProcesses) -> None:
    with (
        example_driver(node, 1, "--shared"),
        demo(node, "gpu-allow-multiple-allocations", "gpu-allow-multiple-allocations") as run,
    ):
        run.apply("gpu-allow-multiple-allocations.yaml")
        run.wait("pod0", "Running")
        run.wait("pod1", "Running")
        got = shares(run)
        assert [(d, c) for d, c, _ in got] == [("gpu-0", {"memory": "16Gi", "compute": "20"})] * 2
        assert got[0][2] != got[1][2]


def test_two_pods_share_one_gpu_partition_by_capacity(node: DRANodeProcesses) -> None:
    name = "gpu-allow-multiple-allocations-partitionable"
    with example_driver(node, 1, "--shared", "--partitions", "4"), demo(node, name, name) as run:
        run.apply(f"{name}.yaml")
        run.wait("pod0", "Running")
        run.wait("pod1", "Running")
        got = shares(run)
        assert [(d, c) for d, c, _ in got] == [("gpu-0-partition-0", {"memory": "8Gi", "compute": "10"})] * 2
        assert got[0][2] != got[1][2]


def test_a_pod_gets_two_gpu_partitions(node: DRANodeProcesses) -> None:
    name = "partitionable-devices"
    with example_driver(node, 1, "--partitions", "4"), demo(node, name, name) as run:
        run.apply(f"{name}.yaml")
        run.wait("pod0", "Running")
        assert run.devices("pod0") == ["gpu-0-partition-0", "gpu-0-partition-1"]


def test_two_pods_share_one_nics_bandwidth(node: DRANodeProcesses) -> None:
    name = "net-consumable-capacity"
    with example_driver(node, 1, "--net", driver=NET_DRIVER), demo(node, name, name) as run:
        run.apply(f"{name}.yaml")
        run.wait("pod0", "Running")
        run.wait("pod1", "Running")
        # Both on the one NIC (README: "the same physical NIC index (0)"), each with the bandwidth it asked
        # for and one virtual function (the request policy's default), which its container's environment
        # carries (README: NET_DEVICE_0_INGRESS_RATE=10000000000; the fake's names: KUBEDEVICE_SHARE_*).
        got = [(d, {k: int(parse_quantity(v)) for k, v in c.items()}) for d, c, _ in shares(run)]
        assert got == [
            ("nic-0", {"ingressBandwidth": 10 * 10**9, "egressBandwidth": 5 * 10**9, "vfs": 1}),
            ("nic-0", {"ingressBandwidth": 5 * 10**9, "egressBandwidth": 5 * 10**9, "vfs": 1}),
        ]
