"""The daemon's topology manager with real processes: two fake plugins on a faked 2-node machine."""

from __future__ import annotations

import json

import pytest

from tests.node_helpers import NodeProcesses, pod_manifest, run_cli

GPU = "example.com/gpu"
NIC = "example.com/nic"
REJECTED = "Pod was rejected: Resources cannot be allocated with Topology locality"


def _start(node: NodeProcesses, *flags: str) -> None:
    """Daemon on 2 NUMA nodes; GPUs 0,2 on node 0 and 1,3 on node 1; NIC 0 on node 0, 1 on node 1."""
    node.start_daemon("--numa-nodes", "2", *flags)
    node.start_plugin(GPU, 4, "--numa-nodes", "2")
    node.start_plugin(NIC, 2, "--numa-nodes", "2")
    node.wait_capacity(GPU, 4, 4)
    node.wait_capacity(NIC, 2, 2)


def _numa_of(node: NodeProcesses, resource: str, devices: list[str]) -> set[int]:
    numa = node.node()["resources"][resource]["numaNodes"]
    return {n for d in devices for n in numa[d]}


def _checkpoint_pod_uids(node: NodeProcesses) -> set[str]:
    data = json.loads(node.paths.checkpoint.read_text())
    return {e["PodUID"] for e in data["Data"]["PodDeviceEntries"] or []}


def _metric(node: NodeProcesses, name: str) -> float:
    text = node.try_status("/metrics").decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def _two_containers(name: str) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: a
    resources: {{limits: {{{GPU}: 1}}}}
  - name: b
    resources: {{limits: {{{GPU}: 1, {NIC}: 1}}}}
"""


def test_single_numa_node_aligns_refuses_and_keeps_hints_across_a_restart(node: NodeProcesses) -> None:
    _start(node, "--topology-manager-policy", "single-numa-node")
    node.write_manifest("three.yaml", pod_manifest("three", {GPU: 3}))
    three = node.wait_phase("three", "Failed")
    assert (three["reason"], three["message"]) == ("TopologyAffinityError", REJECTED)
    assert three["containers"][0]["devices"] == {} and three["containers"][0]["topologyHint"] is None
    # The kubelet's message stays; the daemon says why: only both nodes together hold 3 GPUs.
    why = (
        'single-numa-node policy, container "main": example.com/gpu needs 3, hints [{0,1} preferred], '
        "free per NUMA node [node0 2, node1 2]"
    )
    assert three["detail"] == why
    logged = f"INFO kubedevice.node.daemon: pod default/three ({three['uid']}): TopologyAffinityError because"
    assert f"{logged} {why}" in (node.root / "daemon.log").read_text()
    assert f"default/three: {why}" in run_cli("pods", "--root-dir", str(node.root)).stdout

    node.write_manifest("aligned.yaml", pod_manifest("aligned", {GPU: 2, NIC: 1}))
    aligned = node.wait_phase("aligned", "Running")
    [main] = aligned["containers"]
    gpus, nics = main["devices"][GPU], main["devices"][NIC]
    assert len(gpus) == 2 and len(nics) == 1
    [numa] = _numa_of(node, GPU, gpus) | _numa_of(node, NIC, nics)
    assert main["topologyHint"] == {"numaNodes": [numa], "preferred": True}
    assert _checkpoint_pod_uids(node) == {aligned["uid"]}  # the refused pod left no entry
    assert node.node()["resources"][GPU]["allocated"] == 2
    assert _metric(node, "kubelet_topology_manager_admission_requests_total") == 2
    assert _metric(node, "kubelet_topology_manager_admission_errors_total") == 1
    assert _metric(node, 'kubelet_admission_rejections_total{reason="TopologyAffinityError"}') == 1
    assert _metric(node, "kubelet_container_aligned_compute_resources_count") == 1

    status = run_cli("status", "--root-dir", str(node.root), "--json")
    topology = json.loads(status.stdout)["topology"]
    assert (topology["policy"], topology["scope"], topology["numaNodes"]) == (
        "single-numa-node",
        "container",
        [0, 1],
    )
    status_table = run_cli("status", "--root-dir", str(node.root)).stdout
    assert (
        "topology manager: policy single-numa-node, scope container, NUMA nodes 0,1 (--numa-nodes 2)"
        in status_table
    )
    table = run_cli("pods", "--root-dir", str(node.root))
    assert f"{numa} (preferred)" in table.stdout and "numa hint" in table.stdout

    node.kill_daemon()
    node.start_daemon("--numa-nodes", "2", "--topology-manager-policy", "single-numa-node")
    again = node.wait_phase("aligned", "Running")
    assert again["containers"][0]["devices"] == main["devices"]
    assert again["containers"][0]["topologyHint"] == main["topologyHint"]
    assert node.wait_phase("three", "Failed")["reason"] == "TopologyAffinityError"
    # Re-admitted through the topology manager (hints regenerated), without a new Allocate.
    assert _metric(node, "kubelet_topology_manager_admission_requests_total") == 1
    assert _metric(node, "kubelet_device_plugin_alloc_duration_seconds_count") == 0


def test_best_effort_runs_a_pod_that_no_single_node_can_hold(node: NodeProcesses) -> None:
    _start(node, "--topology-manager-policy", "best-effort")
    node.write_manifest("three.yaml", pod_manifest("three", {GPU: 3}))
    [main] = node.wait_phase("three", "Running")["containers"]
    assert _numa_of(node, GPU, main["devices"][GPU]) == {0, 1}
    # Three GPUs need both nodes however free they are, so {0,1} is the narrowest: preferred.
    assert main["topologyHint"] == {"numaNodes": [0, 1], "preferred": True}


@pytest.mark.parametrize(("policy", "phase"), [("best-effort", "Running"), ("restricted", "Failed")])
def test_restricted_refuses_when_no_preferred_hint_exists(
    node: NodeProcesses, policy: str, phase: str
) -> None:
    _start(node, "--topology-manager-policy", policy)
    # Each of these takes a GPU and the NIC of one node, leaving one free GPU per node.
    for name in ("p1", "p2"):
        node.write_manifest(f"{name}.yaml", pod_manifest(name, {GPU: 1, NIC: 1}))
        [c] = node.wait_phase(name, "Running")["containers"]
        assert len(_numa_of(node, GPU, c["devices"][GPU]) | _numa_of(node, NIC, c["devices"][NIC])) == 1
    node.write_manifest("p3.yaml", pod_manifest("p3", {GPU: 2}))
    p3 = node.wait_phase("p3", phase)
    [main] = p3["containers"]
    if phase == "Running":
        assert main["topologyHint"] == {"numaNodes": [0, 1], "preferred": False}
        assert _numa_of(node, GPU, main["devices"][GPU]) == {0, 1}
    else:
        assert (p3["reason"], p3["message"]) == ("TopologyAffinityError", REJECTED)
        assert main["devices"] == {} and node.node()["resources"][GPU]["allocated"] == 2
        # Two free GPUs, one per node: only both nodes hold them, a hint that is not preferred.
        assert p3["detail"] == (
            'restricted policy, container "main": example.com/gpu needs 2, hints [{0,1}], '
            "free per NUMA node [node0 1, node1 1]"
        )


def test_pod_scope_puts_both_containers_on_one_node(node: NodeProcesses) -> None:
    _start(node, "--topology-manager-policy", "single-numa-node", "--topology-manager-scope", "pod")
    node.write_manifest("pair.yaml", _two_containers("pair"))
    pod = node.wait_phase("pair", "Running")
    a, b = pod["containers"]
    nodes = _numa_of(node, GPU, a["devices"][GPU] + b["devices"][GPU]) | _numa_of(
        node, NIC, b["devices"][NIC]
    )
    assert len(nodes) == 1
    assert a["topologyHint"] == b["topologyHint"] == {"numaNodes": sorted(nodes), "preferred": True}
    assert (
        _metric(node, 'kubelet_container_aligned_compute_resources_count{boundary="numa_node",scope="pod"}')
        == 1
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--topology-manager-policy", "strict"],
            "error: node: invalid configuration: topologyManagerPolicy (--topology-manager-policy) "
            '"strict" must be one of: ["none" "best-effort" "restricted" "single-numa-node"]',
        ),
        (
            ["--topology-manager-scope", "node"],
            "error: node: invalid configuration: topologyManagerScope (--topology-manager-scope) "
            '"node" must be one of: "container", or "pod"',
        ),
        (
            ["--topology-manager-policy", "best-effort", "--numa-nodes", "9"],
            "error: node: topology manager: unsupported on machines with more than 8 NUMA Nodes — check",
        ),
        (
            [
                "--topology-manager-policy",
                "restricted",
                "--topology-manager-policy-options",
                "max-allowable-numa-nodes=4",
            ],
            "error: node: topology manager: the minimum value of "
            '"max-allowable-numa-nodes" should not be less than 8',
        ),
        (
            ["--topology-manager-policy-options", "oops"],
            "error: node: --topology-manager-policy-options: 'oops' is not key=value — write "
            "KEY=VALUE,KEY=VALUE",
        ),
        (["--numa-nodes", "0"], "error: node: --numa-nodes: 0 is not a NUMA node count — give 1 or more"),
    ],
)
def test_bad_topology_flags_are_one_line_and_exit_2(
    node: NodeProcesses, flags: list[str], message: str
) -> None:
    result = run_cli("node", "--root-dir", str(node.root), *flags, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "scope"), [([], "container"), (["--topology-manager-scope", "pod"], "pod")]
)
def test_status_under_policy_none_shows_the_configured_scope(
    node: NodeProcesses, flags: list[str], scope: str
) -> None:
    """The help says container or pod; policy none's internal "none" scope is no value of the flag."""
    node.start_daemon(*flags)
    topology = json.loads(run_cli("status", "--root-dir", str(node.root), "--json").stdout)["topology"]
    assert (topology["policy"], topology["scope"]) == ("none", scope)
    table = run_cli("status", "--root-dir", str(node.root)).stdout
    assert f"topology manager: policy none, scope {scope}, NUMA nodes" in table
