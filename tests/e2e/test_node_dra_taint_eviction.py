"""Device taint eviction through a real daemon process (pkg/controller/devicetainteviction's rules): a
`NoExecute` taint published on a slice device evicts the pod that tolerates it only for a while, once its
`tolerationSeconds` are up, and never the pod that tolerates it for good; a DeviceTaintRule's countdown is
shown, survives a restart of the daemon with the same deadline, and is cancelled by removing the rule.

An evicted pod ends Failed with the controller's DisruptionTarget condition, reason and message, its claim
unprepared once and deallocated, its devices free, counted in `/metrics`; it stays Failed across a restart.
The driver is the raw DRA plugin (tests/dra_plugin.py); the slices are files in `resourceslices/`. One
daemon for the module, each test with devices of its own.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node_dra_helpers import (
    DRIVER,
    NODE,
    DRANodeProcesses,
    PluginThread,
    attribute_is,
    claim_and_pod,
    one_slice,
    raw_driver_node,
)
from tests.node_helpers import run_cli, wait_for

DEVICES = ("ev-0", "ev-1", "ev-2")
RULE = f"""apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {{name: maintenance}}
spec:
  deviceSelector: {{driver: {DRIVER}, pool: {NODE}, device: ev-2}}
  taint: {{key: example.com/maintenance, value: planned, effect: NoExecute}}
"""
CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByDeviceTaintManager",
    "message": "Device Taint manager: deleting due to NoExecute taint",
}


def slices(tainted: tuple[str, ...] = ()) -> str:
    """One slice with DEVICES, those in `tainted` with a NoExecute taint (no timeAdded: first seen)."""
    taint = "taints: [{key: example.com/unhealthy, effect: NoExecute}]"
    devices = "".join(
        f"  - {{name: {d}, attributes: {{slot: {{string: {d}}}}}"
        + (f", {taint}" if d in tainted else "")
        + "}\n"
        for d in DEVICES
    )
    return one_slice(f"{NODE}-evict", devices)


@pytest.fixture(scope="module")
def started() -> Iterator[tuple[DRANodeProcesses, PluginThread]]:
    yield from raw_driver_node("evict.yaml", slices(), len(DEVICES))


def unprepared(plugin: PluginThread, claim: str) -> int:
    """How often the driver was asked to unprepare the claim."""
    calls = plugin.plugin.calls_of("NodeUnprepareResources")
    return sum(1 for c in calls for r in c.claims if r.name == claim)


def metric(node: DRANodeProcesses, name: str) -> float:
    for line in node.try_status("/metrics").decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def rule_status(node: DRANodeProcesses) -> list[dict[str, Any]]:
    return [r["status"]["conditions"][0] for r in node.try_status("/resourceslices")["deviceTaintRules"]]


def test_a_noexecute_taint_evicts_after_toleration_seconds_and_never_the_pod_that_tolerates_it(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    node, plugin = started
    for_a_while = "[{key: example.com/unhealthy, operator: Exists, effect: NoExecute, tolerationSeconds: 1}]"
    for_good = "[{key: example.com/unhealthy, operator: Exists, effect: NoExecute}]"
    node.write_manifest("brief.yaml", claim_and_pod("brief", attribute_is("slot", "ev-0"), for_a_while))
    node.write_manifest("steady.yaml", claim_and_pod("steady", attribute_is("slot", "ev-1"), for_good))
    node.wait_phase("brief", "Running")
    node.wait_phase("steady", "Running")

    node.write_slices("evict.yaml", slices(tainted=("ev-0", "ev-1")))
    pod = node.wait_phase("brief", "Failed")
    assert (pod["reason"], pod["message"]) == (CONDITION["reason"], CONDITION["message"])
    [condition] = pod["conditions"]
    assert {k: condition[k] for k in CONDITION} == CONDITION and condition["lastTransitionTime"]
    assert pod["status"]["conditions"] == pod["conditions"]
    assert pod["detail"] == (
        f"evicted for the taint example.com/unhealthy:NoExecute of ResourceSlice {NODE}-evict "
        f"{DRIVER}/{NODE}/ev-0 taint #0 on {DRIVER}/{NODE}/ev-0"
    )
    # Both taints were seen in the same pass: the pod that tolerates its own for good is never due.
    assert node.pod("steady")["phase"] == "Running"
    assert node.pod("steady")["pendingEviction"] is None
    wait_for(lambda: (node.claim("brief") or {}).get("allocation", 1) is None, "brief to be deallocated")
    assert unprepared(plugin, "brief") == 1
    assert metric(node, "device_taint_eviction_controller_pod_deletions_total") == 1
    table = run_cli("pods", "--root-dir", str(node.root)).stdout
    assert "│ DeletionByDeviceTaintManager:" in table, table
    assert "default/brief: evicted for the taint example.com/unhealthy:NoExecute" in table, table

    # A restart keeps it Failed with its condition, and releases nothing twice.
    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    node.start_daemon()
    node.write_slices("evict.yaml", slices(tainted=("ev-0", "ev-1")))
    pod = node.wait_phase("brief", "Failed")
    assert pod["conditions"] == [condition]
    node.wait_phase("steady", "Running")
    assert unprepared(plugin, "brief") == 1
    state = json.loads(node.paths.state_file.read_text())
    assert [p["phase"] for p in state["pods"].values() if p["name"] == "brief"] == ["Failed"]
    node.write_slices("evict.yaml", slices())


def test_a_device_taint_rules_countdown_survives_a_restart_and_ends_with_the_rule(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    node, plugin = started
    an_hour = "[{key: example.com/maintenance, operator: Exists, effect: NoExecute, tolerationSeconds: 3600}]"
    node.write_manifest("ruled.yaml", claim_and_pod("ruled", attribute_is("slot", "ev-2"), an_hour))
    node.wait_phase("ruled", "Running")
    rule = node.write_manifest("rule.yaml", RULE)

    pending = wait_for(lambda: node.pod("ruled")["pendingEviction"], "ruled's countdown to start")
    assert pending["taints"] == [
        f"example.com/maintenance=planned:NoExecute of DeviceTaintRule maintenance on {DRIVER}/{NODE}/ev-2"
    ]
    [status] = rule_status(node)
    assert {k: status[k] for k in ("type", "status", "reason", "message")} == {
        "type": "EvictionInProgress",
        "status": "True",
        "reason": "PodsPendingEviction",
        "message": "1 pod needs to be evicted in 1 namespace.",
    }
    table = run_cli("pods", "--root-dir", str(node.root)).stdout
    assert f"default/ruled: to be evicted at {pending['at']} for the taint" in table, table

    # The deadline counts from the rule's first sighting, kept on disk: a restart goes on with it.
    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    node.start_daemon()
    node.wait_phase("ruled", "Running")
    assert wait_for(lambda: node.pod("ruled")["pendingEviction"], "the countdown to go on") == pending

    rule.unlink()
    wait_for(lambda: node.pod("ruled")["pendingEviction"] is None, "the countdown to be cancelled")
    assert node.pod("ruled")["phase"] == "Running"
    assert node.try_status("/resourceslices")["deviceTaintRules"] == []
    assert "pod default/ruled" in node.log("daemon") and "eviction cancelled" in node.log("daemon")
    assert unprepared(plugin, "ruled") == 0
