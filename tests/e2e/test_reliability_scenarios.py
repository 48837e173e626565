"""The kubelet's node e2e device plugin scenarios, on the node daemon with real processes.

What tests/e2e/test_node_daemon.py already covers is not repeated here (a pod gets a device and
PodResources shows it; a daemon restart keeps devices without re-admission; Failed, Succeeded and
orphaned pods after a restart; a plugin's death past the grace period; --admission-wait for a new pod).
This file adds: a daemon restart together with a plugin restart, a plugin deleted and recreated within the
grace period, init + sidecar + regular containers, a hung (SIGSTOPped) plugin, a crash's leftovers, and a
node reboot (a new boot ID) with a plugin slow to come back, with and without --admission-wait.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node_helpers import NodeProcesses, node_processes, pod_manifest, run_cli, wait_for

GPU = "example.com/gpu"
NIC = "example.com/nic"


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    yield from node_processes()


def _podresources(node: NodeProcesses) -> dict[str, dict[str, list[str]]]:
    """PodResources List through the CLI: pod name -> container -> sorted device IDs."""
    sock = str(node.paths.pod_resources_socket)
    result = run_cli("podresources", "list", "--socket", sock, "--json")
    assert result.returncode == 0, result.stderr
    out: dict[str, dict[str, list[str]]] = {}
    for pod in json.loads(result.stdout).get("podResources", []):
        out[pod["name"]] = {
            c["name"]: sorted(i for d in c.get("devices", []) for i in d["deviceIds"])
            for c in pod.get("containers", [])
        }
    return out


def _devices(pod: dict[str, Any], resource: str = GPU) -> dict[str, list[str]]:
    return {c["name"]: c["devices"].get(resource, []) for c in pod["containers"]}


def test_daemon_and_plugin_restart_together_keep_devices(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 4)
    node.wait_capacity(GPU, 4, 4)
    node.write_manifest("keep.yaml", pod_manifest("keep", {GPU: 2}))
    before = _devices(node.wait_phase("keep", "Running"))
    assert _podresources(node)["keep"] == {"main": sorted(before["main"])}

    node.kill_daemon()
    node.kill_plugin(GPU)  # the node lost both: the plugin comes back as a new process
    node.start_daemon()
    # Capacity is 0/0 until the plugin is back, yet the pod keeps its devices.
    assert node.pod("keep")["phase"] == "Running"  # type: ignore[index]
    assert _podresources(node)["keep"] == {"main": sorted(before["main"])}
    node.start_plugin(GPU, 4)
    node.wait_capacity(GPU, 4, 4)
    assert _devices(node.wait_phase("keep", "Running")) == before
    node.write_manifest("next.yaml", pod_manifest("next", {GPU: 2}))
    after = _devices(node.wait_phase("next", "Running"))
    assert set(after["main"]).isdisjoint(before["main"])
    assert node.node()["resources"][GPU]["allocated"] == 4


def test_plugin_deleted_and_recreated_within_the_grace_period(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(NIC, 3)
    node.wait_capacity(NIC, 3, 3)
    node.write_manifest("old.yaml", pod_manifest("old", {NIC: 1}))
    old = _devices(node.wait_phase("old", "Running"), NIC)

    node.kill_plugin(NIC)
    node.wait_capacity(NIC, 3, 0)  # unhealthy, still in capacity: inside the 5 minute grace period
    node.write_manifest("early.yaml", pod_manifest("early", {NIC: 1}))
    early = node.wait_phase("early", "Failed")
    assert early["reason"] == "UnexpectedAdmissionError"
    assert early["message"] == f"no healthy devices present; cannot allocate unhealthy devices {NIC}"

    node.start_plugin(NIC, 3)
    node.wait_capacity(NIC, 3, 3)
    status = node.node()["resources"][NIC]
    assert status["endpoint"] == "running" and len(status["endpoints"]) == 1
    node.write_manifest("late.yaml", pod_manifest("late", {NIC: 2}))
    late = _devices(node.wait_phase("late", "Running"), NIC)
    assert set(late["main"]).isdisjoint(old["main"])
    assert _devices(node.pod("old"), NIC) == old  # type: ignore[arg-type]
    listed = _podresources(node)
    assert listed["old"] == {"main": old["main"]} and "early" not in listed


INIT_SIDECAR_MAIN = f"""apiVersion: v1
kind: Pod
metadata:
  name: layered
spec:
  initContainers:
  - name: init
    resources: {{limits: {{{GPU}: 2}}}}
  - name: sidecar
    restartPolicy: Always
    resources: {{limits: {{{GPU}: 1}}}}
  containers:
  - name: main
    resources: {{limits: {{{GPU}: 2}}}}
  - name: plain
"""


def test_init_sidecar_and_regular_containers_get_the_expected_devices(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 4)
    node.wait_capacity(GPU, 4, 4)
    node.write_manifest("layered.yaml", INIT_SIDECAR_MAIN)
    got = _devices(node.wait_phase("layered", "Running"))
    # The init container's devices are reused by the containers after it: the sidecar takes
    # one of them for good, the main container the other plus one fresh device.
    assert got == {
        "init": ["fake-0", "fake-1"],
        "sidecar": ["fake-0"],
        "main": ["fake-1", "fake-2"],
        "plain": [],
    }
    assert node.node()["resources"][GPU]["allocated"] == 3
    # PodResources lists sidecars then regular containers; plain init containers are not listed.
    assert _podresources(node)["layered"] == {
        "sidecar": ["fake-0"],
        "main": ["fake-1", "fake-2"],
        "plain": [],
    }
    node.write_manifest("rest.yaml", pod_manifest("rest", {GPU: 1}))
    assert _devices(node.wait_phase("rest", "Running")) == {"main": ["fake-3"]}


def test_a_hung_plugin_fails_its_pods_and_blocks_no_one_else(node: NodeProcesses) -> None:
    node.start_daemon("--plugin-timeout", "3s")
    hung = node.start_plugin(GPU, 2)
    node.start_plugin(NIC, 2)
    node.wait_capacity(GPU, 2, 2)
    node.wait_capacity(NIC, 2, 2)
    hung.send_signal(signal.SIGSTOP)
    try:
        node.write_manifest("stuck.yaml", pod_manifest("stuck", {GPU: 1}))
        wait_for(lambda: node.pod("stuck"), "the pod of the hung plugin to be seen")
        node.write_manifest("other.yaml", pod_manifest("other", {NIC: 1}))
        node.wait_phase("other", "Running")
        # Admitted while the hung plugin's Allocate is still waiting on its deadline.
        assert node.pod("stuck")["phase"] == "Pending"  # type: ignore[index]
        stuck = node.wait_phase("stuck", "Failed")
        assert stuck["reason"] == "UnexpectedAdmissionError"
        assert stuck["message"].startswith(f"device plugin Allocate rpc for {GPU} failed with err: ")
        assert "deadline" in stuck["message"].lower(), stuck["message"]
        assert node.node()["resources"][GPU]["allocated"] == 0  # nothing half-allocated stays
    finally:
        hung.send_signal(signal.SIGCONT)
    node.write_manifest("after.yaml", pod_manifest("after", {GPU: 2}))
    assert _devices(node.wait_phase("after", "Running")) == {"main": ["fake-0", "fake-1"]}
    assert node.pod("stuck")["phase"] == "Failed"  # type: ignore[index]
    assert node.daemon is not None and node.daemon.poll() is None


def test_a_crashs_leftover_temporary_files_are_removed_at_start(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 1)
    node.wait_capacity(GPU, 1, 1)
    node.write_manifest("p.yaml", pod_manifest("p", {GPU: 1}))
    node.wait_phase("p", "Running")
    node.kill_daemon()
    # What a SIGKILL between creating and renaming a temp file leaves behind, several times over.
    leftovers = [node.paths.plugin_dir / f".{n}" for n in (12345, 678, 4242)]
    leftovers += [node.root / f".{n}.tmp" for n in ("abcd_123", "zz99yy88")]
    for path in leftovers:
        path.write_bytes(b'{"Data":')
    keep = node.paths.plugin_dir / ".not-a-temp-file"
    keep.write_text("x")
    node.start_daemon()
    node.wait_phase("p", "Running")
    assert [p.name for p in leftovers if p.exists()] == []
    assert keep.exists()
    verify = run_cli("checkpoint", "verify", str(node.paths.checkpoint))
    assert verify.returncode == 0, verify.stderr
    assert os.listdir(node.paths.plugin_dir).count("kubelet_internal_checkpoint") == 1


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("0", "error: node: --plugin-timeout: duration '0' must be more than zero"),
        ("soon", "error: node: --plugin-timeout: invalid duration 'soon'"),
    ],
)
def test_a_bad_plugin_timeout_is_one_line_with_exit_2(value: str, line: str) -> None:
    result = run_cli("node", "--root-dir", "/nonexistent/kd", "--plugin-timeout", value)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[0].startswith(line), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _reboot_with_pod(node: NodeProcesses) -> list[str]:
    """A pod Running on boot A; then the node "reboots": daemon and plugin killed, the checkpoint kept."""
    node.start_daemon("--boot-id", "boot-a")
    node.start_plugin(GPU, 2)
    node.wait_capacity(GPU, 2, 2)
    node.write_manifest("survivor.yaml", pod_manifest("survivor", {GPU: 1}))
    devices = _devices(node.wait_phase("survivor", "Running"))["main"]
    node.kill_daemon()
    node.kill_plugin(GPU)
    return devices


def test_node_reboot_with_a_slow_plugin_fails_admission_by_default(node: NodeProcesses) -> None:
    _reboot_with_pod(node)
    node.start_daemon("--boot-id", "boot-b")
    # Nothing runs after a reboot, so the checkpointed pod is admitted again with the kubelet's checks;
    # its plugin has not re-registered, so it has no healthy device.
    failed = node.wait_phase("survivor", "Failed")
    assert failed["reason"] == "UnexpectedAdmissionError"
    assert failed["message"] == f"no healthy devices present; cannot allocate unhealthy devices {GPU}"
    # Its devices were freed, and a plugin coming back does not revive a Failed pod.
    node.start_plugin(GPU, 2)
    node.wait_capacity(GPU, 2, 2)
    survivor = node.pod("survivor")
    assert survivor is not None and survivor["phase"] == "Failed"
    assert _devices(survivor) == {"main": []}
    assert "survivor" not in _podresources(node)


def test_node_reboot_with_admission_wait_keeps_the_same_devices(node: NodeProcesses) -> None:
    devices = _reboot_with_pod(node)
    node.start_daemon("--boot-id", "boot-b", "--admission-wait", "60s")
    assert node.pod("survivor")["phase"] == "Pending"  # type: ignore[index]
    node.start_plugin(GPU, 2)
    running = node.wait_phase("survivor", "Running")
    assert _devices(running)["main"] == devices  # the checkpointed devices, not new ones
    assert _podresources(node)["survivor"] == {"main": sorted(devices)}


def test_daemon_restart_in_the_same_boot_keeps_the_fast_path(node: NodeProcesses) -> None:
    devices = _reboot_with_pod(node)
    node.start_daemon("--boot-id", "boot-a")
    # The same boot: containers still run, so the pod keeps its devices with no plugin at all.
    running = node.wait_phase("survivor", "Running")
    assert _devices(running)["main"] == devices
