"""Crash consistency of the daemon's DRA step: the node daemon SIGKILLed inside the DRA checkpoint writes
of a prepare and of an unprepare (KUBEDEVICE_TEST_DRA_CHECKPOINT_FAULT), and while a prepare call is at
the driver, with a real `kubedevice plugin fake --api dra`.

After every kill the next daemon must find a checkpoint that verifies and no temporary file, keep the
claims of the pods that ran (no new prepare for them), and bring every claim to its right end: a pod whose
prepare the kill cut short is prepared once more (the SDK answers from its own state: the driver's hook
ran once) with its device listed once, unless the prepare's commit was written (then the DRA checkpoint
shows it ran, and it goes on without a call); a claim whose unprepare the kill cut short is unprepared by the
reconcile pass of the next daemon, and no claim another pod still uses is touched.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest

from kubedevice.checkpoint import WRITE_STAGES
from kubedevice.node.config import DRA_CHECKPOINT_FAULT_ENV
from tests.node_dra_helpers import DRIVER, DRANodeProcesses, claim_yaml, dra_node_processes, pod_yaml
from tests.node_helpers import DEADLINE_S, wait_for

UIDS = {f"c{i}": f"c0000000-0000-4000-8000-00000000000{i}" for i in range(1, 4)}
PODS = {"p": "p0000000-0000-4000-8000-000000000001", "q": "p0000000-0000-4000-8000-000000000002"}
PODS["r"] = "p0000000-0000-4000-8000-000000000003"


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def _killed(node: DRANodeProcesses) -> None:
    assert node.daemon is not None
    assert node.daemon.wait(timeout=DEADLINE_S) == -signal.SIGKILL, node.log("daemon")


def _check_files(node: DRANodeProcesses) -> dict[str, tuple[set[str], list[str]]]:
    """The checkpoint verifies (decoding checks its CRC)."""
    return node.checkpoint_claims()


def _temp_files(node: DRANodeProcesses) -> set[str]:
    return {p.name for p in node.root.iterdir() if p.name.startswith(".")}


def _hook_runs(node: DRANodeProcesses, claim: str) -> int:
    """How often the driver's prepare hook ran for the claim (a cached answer is not a run)."""
    return sum(1 for e in node.events("prepare") if e["uid"] == UIDS[claim])


@pytest.mark.parametrize("stage", WRITE_STAGES)
def test_sigkill_inside_the_writes_of_prepare_and_unprepare(node: DRANodeProcesses, stage: str) -> None:
    fault = {DRA_CHECKPOINT_FAULT_ENV: f"{stage}:1:1"}
    node.start_daemon()
    node.start_dra_plugin(devices=3)
    node.write_manifest(
        "claims.yaml", "---\n".join(claim_yaml(c, f"gpu-{i}", uid=UIDS[c]) for i, c in enumerate(UIDS))
    )
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=PODS["p"]))
    node.wait_phase("p", "Running")
    assert node.kill_daemon(signal.SIGINT) == 0

    # Killed at the prepare's first write (the cache pass, before the driver is called).
    node.start_daemon(env=fault)
    node.write_manifest("q.yaml", pod_yaml("q", "c2", uid=PODS["q"]))
    _killed(node)
    left = _temp_files(node)
    recorded = _check_files(node)
    assert recorded["default/c1"] == ({PODS["p"]}, [f"{DRIVER}/node-1/gpu-0"])
    node.start_daemon()
    node.wait_phase("q", "Running")
    assert not left & _temp_files(node), "the killed write's temporary file is still there"
    assert node.pod("p")["phase"] == "Running"
    claims = _check_files(node)
    assert claims["default/c2"] == ({PODS["q"]}, [f"{DRIVER}/node-1/gpu-1"])
    assert (_hook_runs(node, "c1"), _hook_runs(node, "c2")) == (1, 1)
    assert [e for e in node.events("prepare-cached") if e["uid"] == UIDS["c1"]] == []

    # Killed at the unprepare's write (the entry deleted once the driver answered).
    assert node.kill_daemon(signal.SIGINT) == 0
    node.start_daemon(env=fault)
    (node.paths.manifests / "q.yaml").unlink()
    _killed(node)
    _check_files(node)
    left = _temp_files(node)
    node.start_daemon()
    wait_for(lambda: "default/c2" not in _check_files(node), "the next daemon to unprepare c2")
    assert not left & _temp_files(node), "the killed write's temporary file is still there"
    assert node.pod("q") is None
    assert _check_files(node) == {"default/c1": ({PODS["p"]}, [f"{DRIVER}/node-1/gpu-0"])}
    assert {e["uid"] for e in node.events("unprepare")} == {UIDS["c2"]}


def test_sigkill_while_the_driver_prepares(node: DRANodeProcesses) -> None:
    node.start_daemon()
    node.start_dra_plugin(devices=3)
    node.write_manifest("claims.yaml", claim_yaml("c3", "gpu-2", uid=UIDS["c3"]))
    node.write_manifest("r.yaml", pod_yaml("r", "c3", uid=PODS["r"]))
    wait_for(lambda: _hook_runs(node, "c3"), "the driver to be asked to prepare c3")
    node.kill_daemon(signal.SIGKILL)
    _check_files(node)
    node.start_daemon()
    node.wait_phase("r", "Running")
    assert _check_files(node) == {"default/c3": ({PODS["r"]}, [f"{DRIVER}/node-1/gpu-2"])}
    assert _hook_runs(node, "c3") == 1
    assert node.pod("r")["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-2"]


def test_sigkill_once_the_commit_is_written_restores_the_pod_from_the_checkpoint(
    node: DRANodeProcesses,
) -> None:
    """Killed right after the prepare's second write (the commit: the claim's entry now holds its devices)
    and before the pod is reported Running: the next daemon knows from that entry alone that the pod ran
    (the pod state file never lists it) and goes on without any prepare call."""
    node.start_daemon()
    node.start_dra_plugin(devices=3)
    node.write_manifest(
        "claims.yaml", "---\n".join(claim_yaml(c, f"gpu-{i}", uid=UIDS[c]) for i, c in enumerate(UIDS))
    )
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=PODS["p"]))
    node.wait_phase("p", "Running")
    assert node.kill_daemon(signal.SIGINT) == 0
    # The restarted daemon's first DRA checkpoint write is q's cache pass, the second its commit; seed 10
    # draws 0.57 then 0.43: the cache pass's rename survives, the commit's is the kill.
    node.start_daemon(env={DRA_CHECKPOINT_FAULT_ENV: "after-rename:0.5:10"})
    node.write_manifest("q.yaml", pod_yaml("q", "c2", uid=PODS["q"]))
    _killed(node)
    assert _check_files(node)["default/c2"] == ({PODS["q"]}, [f"{DRIVER}/node-1/gpu-1"])
    assert PODS["q"] not in json.loads(node.paths.state_file.read_text())["pods"]
    node.start_daemon()
    running = node.wait_phase("q", "Running")
    assert running["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-1"]
    assert node.pod("p")["phase"] == "Running"
    wait_for(node.driver_devices, "the plugin to register with the new daemon")
    assert (_hook_runs(node, "c1"), _hook_runs(node, "c2")) == (1, 1)
    assert node.events("prepare-cached") == []
