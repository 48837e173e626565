"""Binding conditions (KEP-5007) through a real daemon process, as the scheduler's PreBind waits for them:
a pod whose allocated device has `bindingConditions` is not prepared until each is `True` in the claim's
`status.devices` (written by the driver through `PUT /claims/<ns>/<name>/status`), and says what it waits
for; a `bindingFailureConditions` condition `True`, or the binding timeout, deallocates the claim and the
pod is allocated again, with the scheduler's texts; a restart in the middle of a wait goes on with it
(the allocation and its `allocationTimestamp` kept, nothing prepared twice).

The driver is the raw DRA plugin (tests/dra_plugin.py); the slices are a file in `resourceslices/`. One
daemon for the module, started again with a short `--dra-binding-timeout` for the last test.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from kubedevice.statusapi.client import StatusClient
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

ATTACHED = "example.com/attached"
FAILED = "example.com/attach-failed"
WAITING = f"waiting for binding conditions for device on node {NODE}"
PREBIND = 'running PreBind plugin "DynamicResources": '


def slices() -> str:
    """Attach-on-demand devices in groups (`group` attribute): each waits to be attached."""
    devices = "".join(
        f"  - {{name: {name}, attributes: {{group: {{string: {name.rsplit('-', 1)[0]}}}}}, "
        f"bindingConditions: [{ATTACHED}], bindingFailureConditions: [{FAILED}]}}\n"
        for name in ("wait-0", "fail-0", "fail-1", "restart-0", "slow-0")
    )
    return one_slice(f"{NODE}-attach", devices)


@pytest.fixture(scope="module")
def started() -> Iterator[tuple[DRANodeProcesses, PluginThread]]:
    yield from raw_driver_node("attach.yaml", slices(), 5)


def _plus(stamp: str, seconds: int) -> str:
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def prepared(plugin: PluginThread, claim: str) -> int:
    """How often the driver was asked to prepare the claim."""
    calls = plugin.plugin.calls_of("NodePrepareResources")
    return sum(1 for c in calls for r in c.claims if r.name == claim)


def allocation(node: DRANodeProcesses, claim: str) -> dict[str, Any] | None:
    found = node.try_status(f"/claims/default/{claim}")
    return (found or {}).get("status", {}).get("allocation")


def report(node: DRANodeProcesses, claim: str, device: str, condition: str, reason: str = "Attached") -> None:
    """The driver says `condition` is True for `device` of the claim."""
    entry = {
        "driver": DRIVER,
        "pool": NODE,
        "device": device,
        "conditions": [
            {
                "type": condition,
                "status": "True",
                "reason": reason,
                "message": f"{device}: {reason}",
                "lastTransitionTime": "2026-07-24T10:00:00Z",
            }
        ],
    }
    client = StatusClient.under(node.root)
    asyncio.run(client.put_claim_status("default", claim, driver=DRIVER, devices=[entry]))


def waiting(node: DRANodeProcesses, name: str, text: str = "") -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        pod = node.pod(name)
        if pod is None or pod["reason"] != "BindingConditionsPending" or text not in pod["detail"]:
            return None
        return pod

    return wait_for(check, f"pod {name} to wait for its binding conditions ({text!r})")


def test_a_pod_waits_for_its_binding_conditions_then_runs(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    node, plugin = started
    node.write_manifest("wait.yaml", claim_and_pod("wait", attribute_is("group", "wait")))
    pod = waiting(node, "wait")
    assert (pod["phase"], pod["message"]) == ("Pending", WAITING)
    stamp = allocation(node, "wait")["allocationTimestamp"]
    assert pod["detail"] == (
        f"claim default/wait: {DRIVER}/{NODE}/wait-0 waits for {ATTACHED} to be True "
        f"(binding times out at {_plus(stamp, 600)})"
    )
    table = run_cli("pods", "--root-dir", str(node.root)).stdout
    assert f"default/wait: claim default/wait: {DRIVER}/{NODE}/wait-0 waits for {ATTACHED}" in table, table
    assert prepared(plugin, "wait") == 0

    report(node, "wait", "wait-0", ATTACHED)
    pod = node.wait_phase("wait", "Running")
    assert (pod["reason"], pod["message"], pod["detail"]) == ("", "", "")
    assert prepared(plugin, "wait") == 1


def test_a_failure_condition_deallocates_the_claim_and_the_pod_is_allocated_again(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    node, plugin = started
    node.write_manifest("fail.yaml", claim_and_pod("fail", attribute_is("group", "fail")))
    waiting(node, "fail")
    first = allocation(node, "fail")["devices"]["results"][0]["device"]
    report(node, "fail", first, FAILED, reason="NoPath")

    said = (
        f'{PREBIND}claim fail binding failed: reason=NoPath, message="{first}: NoPath"; '
        "deallocation of ResourceClaim completed"
    )
    pod = waiting(node, "fail", f"the last binding attempt: {said}")
    assert pod["message"] == WAITING
    # Allocated again (its status.devices went with the old allocation): it waits for the new device.
    claim = node.claim("fail")
    assert claim["statusDevices"] == []
    again = allocation(node, "fail")["devices"]["results"][0]["device"]
    assert said in node.log("daemon")
    report(node, "fail", again, ATTACHED)
    node.wait_phase("fail", "Running")
    assert prepared(plugin, "fail") == 1


def test_a_restart_in_the_middle_of_a_binding_wait_goes_on_with_it(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    node, plugin = started
    node.write_manifest("restart.yaml", claim_and_pod("restart", attribute_is("group", "restart")))
    waiting(node, "restart")
    before = allocation(node, "restart")
    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    node.start_daemon()
    node.publish("attach.yaml", slices(), 5)
    pod = waiting(node, "restart")
    # The same allocation, made before the restart: the timeout still counts from then.
    assert allocation(node, "restart") == before
    assert pod["message"] == WAITING
    report(node, "restart", "restart-0", ATTACHED)
    node.wait_phase("restart", "Running")
    assert prepared(plugin, "restart") == 1


def test_the_binding_timeout_deallocates_the_claim_and_it_is_allocated_again(
    started: tuple[DRANodeProcesses, PluginThread],
) -> None:
    node, _ = started
    node.kill_daemon(signal.SIGTERM)
    node.start_daemon("--dra-binding-timeout", "1s")
    node.publish("attach.yaml", slices(), 5)
    node.write_manifest("slow.yaml", claim_and_pod("slow", attribute_is("group", "slow")))
    said = f"{PREBIND}claim slow binding timeout; deallocation of ResourceClaim completed"
    pod = waiting(node, "slow", f"the last binding attempt: {said}")
    assert pod["phase"] == "Pending"
    assert said in node.log("daemon")
    (node.paths.manifests / "slow.yaml").unlink()
    node.wait_gone("slow")
