"""Crash consistency of an eviction: the daemon SIGKILLed inside the `pod_state.json` write that records a
pod the device taint eviction controller evicts (KUBEDEVICE_TEST_POD_STATE_FAULT), at each write stage; and
inside the `device_taints.json` write that records when a taint without `timeAdded` was first seen
(KUBEDEVICE_TEST_TAINT_STATE_FAULT), from which a countdown counts.

The eviction is written before anything is undone. Killed before the rename, the file still says nothing
of it: the next daemon finds the pod running, its countdown long over, and evicts it. Killed after, the
next daemon finds it Failed and finishes releasing its claim. Either way the pod ends Failed with its
condition, its claim is unprepared exactly once and deallocated, and it was prepared only once.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.checkpoint import WRITE_STAGES
from kubedevice.node.config import POD_STATE_FAULT_ENV, TAINT_STATE_FAULT_ENV
from tests.dra_plugin import Device
from tests.node_dra_helpers import (
    DRIVER,
    NODE,
    DRANodeProcesses,
    PluginThread,
    claim_and_pod,
    one_slice,
    raw_driver_node,
)
from tests.node_helpers import DEADLINE_S, wait_for

SLICES = one_slice(f"{NODE}-crash", "".join(f"  - {{name: cr-{i}}}\n" for i in range(len(WRITE_STAGES))))


def rule(device: str) -> str:
    return f"""apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {{name: crash}}
spec:
  deviceSelector: {{driver: {DRIVER}, pool: {NODE}, device: {device}}}
  taint: {{key: example.com/broken, effect: NoExecute}}
"""


@pytest.fixture
def started() -> Iterator[tuple[DRANodeProcesses, PluginThread]]:
    for node, plugin in raw_driver_node("crash.yaml", SLICES, len(WRITE_STAGES)):
        # A prepared device on record: a pod going Running writes no pod_state.json.
        plugin.plugin.set_default_devices(lambda claim: [Device(NODE, "cr-0")])
        yield node, plugin


def _serve(node: DRANodeProcesses, *, env: dict[str, str] | None = None) -> None:
    node.start_daemon(env=env)
    node.publish("crash.yaml", SLICES, len(WRITE_STAGES))


def calls(plugin: PluginThread, method: str, claim: str) -> int:
    return sum(1 for c in plugin.plugin.calls_of(method) for r in c.claims if r.name == claim)


def test_sigkill_inside_the_write_of_an_eviction_evicts_it_once(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    node, plugin = started
    for n, stage in enumerate(WRITE_STAGES):
        name = f"p{n}"
        node.kill_daemon(signal.SIGTERM)
        _serve(node, env={POD_STATE_FAULT_ENV: f"{stage}:1:1"})
        node.write_manifest(f"{name}.yaml", claim_and_pod(name))
        node.wait_phase(name, "Running")
        device = node.claim(name)["allocation"]["devices"]["results"][0]["device"]
        node.write_manifest("rule.yaml", rule(device))
        assert node.daemon is not None and node.daemon.wait(timeout=DEADLINE_S) == -signal.SIGKILL, stage
        on_disk = json.loads(node.paths.state_file.read_text())["pods"]
        evicted = [p["phase"] for p in on_disk.values() if p["name"] == name]
        assert evicted == (["Failed"] if stage == "after-rename" else []), stage

        _serve(node)
        pod = node.wait_phase(name, "Failed")
        assert pod["reason"] == "DeletionByDeviceTaintManager", stage
        assert [c["type"] for c in pod["conditions"]] == ["DisruptionTarget"], stage
        wait_for(
            lambda n=name: (node.claim(n) or {}).get("allocation", 1) is None, f"{name} to be deallocated"
        )
        wait_for(lambda n=name: calls(plugin, "NodeUnprepareResources", n) == 1, f"{name} to be unprepared")
        assert calls(plugin, "NodePrepareResources", name) == 1, stage

        (node.paths.manifests / "rule.yaml").unlink()
        (node.paths.manifests / f"{name}.yaml").unlink()
        node.wait_gone(name)
        assert calls(plugin, "NodeUnprepareResources", name) == 1, stage


def test_sigkill_inside_the_write_of_a_taints_first_sighting_never_evicts_early(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    """Killed before the rename, the sighting is lost and the next daemon sees the taint anew: the countdown
    starts later, never earlier. Killed after, the next daemon counts from the sighting on disk. Either way
    the pod tolerating the taint for an hour stays Running, and from then on a restart keeps its deadline."""
    node, plugin = started
    an_hour = "[{key: example.com/broken, operator: Exists, effect: NoExecute, tolerationSeconds: 3600}]"
    for n, stage in enumerate(WRITE_STAGES):
        name = f"t{n}"
        node.kill_daemon(signal.SIGTERM)
        _serve(node, env={TAINT_STATE_FAULT_ENV: f"{stage}:1:1"})
        node.write_manifest(f"{name}.yaml", claim_and_pod(name, tolerations=an_hour))
        node.wait_phase(name, "Running")
        device = node.claim(name)["allocation"]["devices"]["results"][0]["device"]
        node.write_manifest("rule.yaml", rule(device))
        assert node.daemon is not None and node.daemon.wait(timeout=DEADLINE_S) == -signal.SIGKILL, stage
        on_disk = node.root / "device_taints.json"

        def sightings(path: Path = on_disk) -> list[Any]:
            return list(json.loads(path.read_text())["firstSeen"]) if path.exists() else []

        assert len(sightings()) == (1 if stage == "after-rename" else 0), stage

        _serve(node)
        pending = wait_for(lambda n=name: node.pod(n)["pendingEviction"], f"{name}'s countdown")
        assert node.pod(name)["phase"] == "Running", stage
        assert len(sightings()) == 1, stage
        node.kill_daemon(signal.SIGKILL)
        _serve(node)
        node.wait_phase(name, "Running")
        assert wait_for(lambda n=name: node.pod(n)["pendingEviction"], "the countdown to go on") == pending

        (node.paths.manifests / "rule.yaml").unlink()
        wait_for(lambda n=name: node.pod(n)["pendingEviction"] is None, "the countdown to be cancelled")
        (node.paths.manifests / f"{name}.yaml").unlink()
        node.wait_gone(name)
        assert calls(plugin, "NodePrepareResources", name) == 1, stage
        assert calls(plugin, "NodeUnprepareResources", name) == 1, stage
