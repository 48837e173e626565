"""What `kubedevice node` says beyond the kubelet's statuses, as real processes: `--log-level debug` shows
kubedevice's own steps and not gRPC's internals, and a pod asking for a resource no plugin serves runs
without it, said once in the log and shown by `pods`."""

from __future__ import annotations

import pytest

from tests.node_helpers import NodeProcesses, pod_manifest, run_cli, wait_for

GPU = "example.com/gpu"
ABSENT = "example.com/absent"
RUNS_WITHOUT = f"{ABSENT}: no plugin serves this resource; the container runs without it"


def daemon_log(node: NodeProcesses) -> str:
    return (node.root / "daemon.log").read_text(errors="replace")


def test_debug_shows_kubedevice_steps_and_an_unserved_resource_is_said_once(node: NodeProcesses) -> None:
    node.start_daemon("--log-level", "debug")
    node.start_plugin(GPU, 2)
    node.wait_capacity(GPU, 2, 2)
    node.write_manifest("p.yaml", pod_manifest("p", {GPU: 1, ABSENT: 1}))
    p = node.wait_phase("p", "Running")
    assert p["warnings"] == [RUNS_WITHOUT] and p["detail"] == ""
    assert list(p["containers"][0]["devices"]) == [GPU]  # it runs, without the absent resource
    table = run_cli("pods", "--root-dir", str(node.root)).stdout
    assert f"default/p: {RUNS_WITHOUT}" in table

    # More scans (the same file written again, another pod) say nothing more about p.
    scans = daemon_log(node).count("manifest scan of")
    node.write_manifest("p.yaml", pod_manifest("p", {GPU: 1, ABSENT: 1}))
    wait_for(lambda: daemon_log(node).count("manifest scan of") > scans, "a scan of p.yaml again")
    node.write_manifest("q.yaml", pod_manifest("q", {GPU: 1}))
    node.wait_phase("q", "Running")
    log = daemon_log(node)
    said = [line for line in log.splitlines() if RUNS_WITHOUT in line]
    assert len(said) == 1 and f"WARNING kubedevice.node.admission: pod default/p ({p['uid']})" in said[0], (
        said
    )
    assert node.pod("q")["warnings"] == []  # type: ignore[index]

    for step in (
        f"DEBUG kubedevice.manager.registration: Register: resource {GPU}, endpoint ",
        f"DEBUG kubedevice.manager.endpoint_lifecycle: ListAndWatch update of {GPU}: 2 healthy, 0 unhealthy",
        f"DEBUG kubedevice.node.admission: pod default/p ({p['uid']}) got devices: main: {GPU} fake-",
        f"DEBUG kubedevice.node.manifest_folder: manifest scan of {node.paths.manifests} (",
    ):
        assert step in log, step
    # gRPC's internals (its Python modules' debug lines) and asyncio's selector stay out.
    assert not [line for line in log.splitlines() if " grpc." in line or " asyncio:" in line]


def test_grpc_verbosity_lets_grpc_speak(node: NodeProcesses, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPC_VERBOSITY", "debug")
    node.start_daemon("--log-level", "info")
    assert " DEBUG grpc." in daemon_log(node)
    assert "DEBUG kubedevice." not in daemon_log(node)  # kubedevice's own level is still --log-level
