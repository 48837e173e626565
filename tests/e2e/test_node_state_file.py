"""The node daemon's pod state file holds only terminated pods, and so changes only when they do."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node_helpers import NodeProcesses, node_processes, pod_manifest, wait_for

GPU = "example.com/gpu"


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    yield from node_processes()


def saved_pods(node: NodeProcesses) -> dict[str, dict[str, Any]]:
    """name -> saved entry, as the file on disk has them."""
    try:
        document = json.loads(node.paths.state_file.read_text())
    except FileNotFoundError:
        return {}  # not written yet: the daemon writes it after its first scan
    return {entry["name"]: entry for entry in document["pods"].values()}


def saved_names(node: NodeProcesses, names: set[str]) -> dict[str, dict[str, Any]] | None:
    saved = saved_pods(node)
    return saved if set(saved) == names else None


def test_only_failed_and_succeeded_pods_are_saved_and_a_retried_pod_leaves_the_file(
    node: NodeProcesses,
) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 4)
    node.wait_capacity(GPU, 4, 4)
    node.write_manifest("run.yaml", pod_manifest("run", {GPU: 1}))
    node.write_manifest("retry.yaml", pod_manifest("retry", {GPU: 9}))
    node.write_manifest(
        "done.yaml",
        pod_manifest("done", {GPU: 1}, extra_meta="\n  annotations: {kubedevice.io/phase: Succeeded}"),
    )
    node.wait_phase("run", "Running")
    node.wait_phase("retry", "Failed")
    saved = wait_for(lambda: saved_names(node, {"retry", "done"}), "the failed and succeeded pods saved")
    assert {name: entry["phase"] for name, entry in saved.items()} == {"retry": "Failed", "done": "Succeeded"}
    assert (
        saved["retry"]["reason"] == "UnexpectedAdmissionError" and "Requested: 9" in saved["retry"]["message"]
    )
    boot_id = json.loads(node.paths.state_file.read_text())["bootID"]
    assert boot_id

    # Fixed, the failed pod is admitted again: it is no longer terminated, so no longer saved.
    node.write_manifest("retry.yaml", pod_manifest("retry", {GPU: 2}))
    retried = node.wait_phase("retry", "Running")
    wait_for(lambda: saved_names(node, {"done"}), "the retried pod to leave the state file")

    # A restart keeps both Running pods' devices (from the checkpoint) and the Succeeded pod's phase.
    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    node.start_daemon()
    again = node.wait_phase("retry", "Running")
    assert again["containers"][0]["devices"] == retried["containers"][0]["devices"]
    node.wait_phase("run", "Running")
    assert node.pod("done")["phase"] == "Succeeded"  # type: ignore[index]
    assert json.loads(node.paths.state_file.read_text())["bootID"] == boot_id
