"""What a new DRA user meets with real processes (the daemon and `kubedevice plugin fake --api dra`): a
hand-written allocation in a pool the driver does not publish is refused with a line naming the device, and
a container naming a request its claim does not have runs with a warning saying so."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.e2e.test_node_dra import GPU_CLASS
from tests.node_dra_helpers import DRIVER, DRANodeProcesses, claim_yaml, dra_node_processes, pod_yaml
from tests.node_helpers import run_cli


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def test_an_allocation_in_another_pool_is_refused_naming_the_device(node: DRANodeProcesses) -> None:
    """The example's old trap: `pool: host-a` on a node named node-1 named gpu-0 of no pool the driver
    publishes; the driver's gpu-0 of pool node-1 is another device, so the claim is not prepared."""
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1").replace("pool: node-1", "pool: host-a"))
    node.write_manifest("p.yaml", pod_yaml("p", "c1"))
    text = (
        f"claim default/c1: device gpu-0 of pool host-a is not one of {DRIVER}'s devices (its pool is node-1)"
    )
    pod = node.wait_message("p", text)
    assert (pod["phase"], pod["reason"]) == ("Pending", "FailedPrepareDynamicResources")
    assert "\n" not in pod["message"]
    assert node.events("prepare") == []
    assert [devices for _, devices in node.checkpoint_claims().values()] == [[]]  # nothing prepared


def test_a_container_naming_a_request_its_claim_lacks_runs_with_a_warning(node: DRANodeProcesses) -> None:
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest("class.yaml", GPU_CLASS)
    node.write_manifest("claims.yaml", claim_yaml("c1", None))
    pod = pod_yaml("p", "c1").replace("- {name: c1}", "- {name: c1, request: nosuch}")
    pod = pod.replace(
        "  - name: main\n",
        "  - name: side\n    resources:\n      claims:\n      - {name: c1, request: gpu}\n  - name: main\n",
    )
    node.write_manifest("p.yaml", pod)
    node.wait_phase("p", "Running")

    listed = run_cli("pods", "--root-dir", str(node.root), "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)["pods"]
    warning = (
        "claim c1, request nosuch: ResourceClaim c1 has no such request (its requests: gpu); "
        "container main runs without it"
    )
    assert entry["warnings"] == [warning]
    by_name = {c["name"]: c for c in entry["containers"]}
    assert by_name["main"]["cdiDevices"] == [] and by_name["side"]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-0"]
    said = [line for line in node.log("daemon").splitlines() if "request nosuch" in line]
    assert len(said) == 1 and "WARNING" in said[0] and warning in said[0], said
    table = run_cli("pods", "--root-dir", str(node.root))
    assert warning in " ".join(table.stdout.split()), table.stdout
