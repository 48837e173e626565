"""A daemon restart never fails a pod that was Running (same boot), whether or not it holds devices.

Two kinds of pods hold no checkpoint entry: a zero request (`example.com/r0: "0"`, which charts template
all the time) and a pod admitted before its plugin ever registered (it runs without devices, as on the
kubelet). The kubelet keeps both running across its own restart (their containers are already running),
and admits both again with its checks after a node reboot (a new boot ID). Real processes: the daemon,
`kubedevice plugin fake`, SIGKILL and SIGTERM.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node_helpers import NodeProcesses, node_processes, pod_manifest, run_cli

R0 = "example.com/r0"
NO_HEALTHY = f"no healthy devices present; cannot allocate unhealthy devices {R0}"


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    yield from node_processes()


def _plugin_events(node: NodeProcesses, kind: str) -> list[str]:
    return [line for line in node.log("plugin-" + R0.replace("/", "_")).splitlines() if line.startswith(kind)]


def _checkpoint_pods(node: NodeProcesses) -> set[str]:
    result = run_cli("checkpoint", "inspect", str(node.paths.checkpoint), "--json")
    assert result.returncode == 0, result.stderr
    return {e["podUID"] for e in json.loads(result.stdout)["entries"]}


def _holds_nothing(pod: dict[str, Any]) -> None:
    for container in pod["containers"]:
        assert container["devices"] == {}, pod
        assert container["runOptions"]["envs"] == {} and container["runOptions"]["devices"] == [], pod


def _zero_request_pod_running(node: NodeProcesses) -> dict[str, Any]:
    node.start_daemon("--boot-id", "boot-a")
    node.start_plugin(R0, 2, "--prestart")
    node.wait_capacity(R0, 2, 2)
    node.write_manifest("zero.yaml", pod_manifest("zero", {R0: '"0"'}))
    running = node.wait_phase("zero", "Running")
    _holds_nothing(running)
    # No Allocate, no PreStartContainer, nothing in the checkpoint.
    assert _plugin_events(node, "allocate") == [] and _plugin_events(node, "pre-start") == []
    assert running["uid"] not in _checkpoint_pods(node)
    return running


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_zero_request_pod_survives_a_restart_without_its_plugin(node: NodeProcesses, sig: int) -> None:
    _zero_request_pod_running(node)
    node.kill_daemon(sig)
    node.kill_plugin(R0)
    node.start_daemon("--boot-id", "boot-a")
    # r0 is registered in the checkpoint but has no healthy device until its plugin is back: a new
    # admission would fail, a running pod must not.
    _holds_nothing(node.wait_phase("zero", "Running"))
    node.start_plugin(R0, 2, "--prestart")
    node.wait_capacity(R0, 2, 2)
    assert node.pod("zero")["phase"] == "Running"  # type: ignore[index]
    # A plugin restart changes nothing either, and it was never asked for anything.
    node.kill_plugin(R0)
    node.wait_capacity(R0, 2, 0)
    assert node.pod("zero")["phase"] == "Running"  # type: ignore[index]
    assert _plugin_events(node, "allocate") == [] and _plugin_events(node, "pre-start") == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_pod_admitted_before_its_plugin_survives_a_daemon_restart(node: NodeProcesses, sig: int) -> None:
    node.start_daemon("--boot-id", "boot-a")
    node.write_manifest("early.yaml", pod_manifest("early", {R0: 1}))
    _holds_nothing(node.wait_phase("early", "Running"))  # r0 is unknown: it runs without it
    node.start_plugin(R0, 2)
    node.wait_capacity(R0, 2, 2)
    node.kill_daemon(sig)
    node.kill_plugin(R0)
    node.start_daemon("--boot-id", "boot-a")
    _holds_nothing(node.wait_phase("early", "Running"))
    assert _plugin_events(node, "allocate") == []


def test_after_a_reboot_both_kinds_are_admitted_again_with_the_kubelets_checks(node: NodeProcesses) -> None:
    _zero_request_pod_running(node)
    node.write_manifest("early.yaml", pod_manifest("early", {"example.com/late": 1}))
    node.wait_phase("early", "Running")
    node.kill_daemon()
    node.kill_plugin(R0)
    node.start_daemon("--boot-id", "boot-b")
    # Nothing runs after a reboot: r0 is registered (the checkpoint says so) with no healthy device, so a
    # request for it, even of zero, fails as on the kubelet; a resource nobody registered is no device
    # plugin resource at all, so that pod is admitted without it again.
    failed = node.wait_phase("zero", "Failed")
    assert (failed["reason"], failed["message"]) == ("UnexpectedAdmissionError", NO_HEALTHY)
    _holds_nothing(node.wait_phase("early", "Running"))
