"""The node daemon as a process, with real `kubedevice plugin fake` plugins, driven through its CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
from collections.abc import Iterator

import pytest

from tests.node_helpers import (
    CLI,
    NodeProcesses,
    node_processes,
    pod_manifest,
    run_cli,
    short_tmpdir,
    wait_for,
)

GPU = "example.com/gpu"
NIC = "example.com/nic"


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    yield from node_processes()


def _json_cli(node: NodeProcesses, *args: str) -> object:
    result = run_cli(*args, "--root-dir", str(node.root), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _alloc_count(node: NodeProcesses) -> float:
    metrics = node.try_status("/metrics").decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("kubelet_device_plugin_alloc_duration_seconds_count")
    )


def test_admission_status_pods_and_podresources(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 4, "--numa-nodes", "2", "--preferred")
    node.wait_capacity(GPU, 4, 4)
    node.write_manifest(
        "fits.yaml",
        pod_manifest("fits", {GPU: 2}),
    )
    fits = node.wait_phase("fits", "Running")
    node.write_manifest("big.yaml", pod_manifest("big", {GPU: 8}))
    big = node.wait_phase("big", "Failed")

    assert big["reason"] == "UnexpectedAdmissionError"
    assert big["message"] == f"requested number of devices unavailable for {GPU}. Requested: 8, Available: 2"
    [container] = fits["containers"]
    devices = container["devices"][GPU]
    # Round-robin layout: the preferred allocation packs both on one NUMA node (even or odd IDs).
    assert devices in (["fake-0", "fake-2"], ["fake-1", "fake-3"])
    assert container["allocatedResourcesStatus"] == [
        {"name": GPU, "resources": [{"resourceID": d, "health": "Healthy"} for d in devices]}
    ]
    assert set(container["runOptions"]) == {"envs", "mounts", "devices", "annotations", "cdiDevices"}

    status = _json_cli(node, "status")
    assert isinstance(status, dict)
    assert status["capacity"] == {GPU: 4} and status["allocatable"] == {GPU: 4}
    assert (
        status["resources"][GPU]["endpoint"] == "running"
        and status["resources"][GPU]["stoppedSeconds"] is None
    )
    assert status["resources"][GPU]["healthy"] == [f"fake-{i}" for i in range(4)]
    # allocatable stays 4 while 2 are held: allocated and free say what a new pod can get
    assert (status["resources"][GPU]["allocated"], status["resources"][GPU]["free"]) == (2, 2)
    assert status["checkpoint"] == {"path": str(node.paths.checkpoint), "error": None}
    answer = _json_cli(node, "pods")
    assert answer["manifestErrors"] == [] and {p["name"]: p["phase"] for p in answer["pods"]} == {
        "fits": "Running",
        "big": "Failed",
    }

    for table_cmd in ("status", "pods"):
        table = run_cli(table_cmd, "--root-dir", str(node.root))
        assert table.returncode == 0 and "example.com" in table.stdout, table.stderr
    header = run_cli("status", "--root-dir", str(node.root)).stdout
    assert "allocated" in header and "free" in header

    sock = str(node.paths.pod_resources_socket)
    listed = json.loads(run_cli("podresources", "list", "--socket", sock, "--json").stdout)
    [fits_pr] = [p for p in listed["podResources"] if p["name"] == "fits"]
    assert sorted(d["deviceIds"][0] for d in fits_pr["containers"][0]["devices"]) == devices
    got = json.loads(
        run_cli("podresources", "get", "fits", "-n", "default", "--socket", sock, "--json").stdout
    )
    assert got["podResources"]["name"] == "fits"
    allocatable = json.loads(run_cli("podresources", "allocatable", "--socket", sock, "--json").stdout)
    assert len(allocatable["devices"]) == 4
    table = run_cli("podresources", "list", "--socket", sock)
    assert table.returncode == 0 and devices[0] in table.stdout
    missing = run_cli("podresources", "get", "nope", "--socket", sock)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "error: podresources get: pod nope in namespace default not found — `kubedevice podresources list` "
        "shows the pods"
    ]
    http = run_cli("podresources", "list", "--socket", str(node.paths.status_socket))
    assert http.returncode == 2 and http.stderr.strip().splitlines() == [
        f"error: podresources list: {node.paths.status_socket} is not a PodResources socket (it answers "
        "HTTP) — pass --socket with another"
    ]

    for path in (node.paths.status_socket, node.paths.pod_resources_socket, node.paths.kubelet_socket):
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o007 == 0, path
    assert stat.S_IMODE(os.stat(node.paths.plugin_dir).st_mode) == 0o750

    node.paths.manifests.joinpath("fits.yaml").unlink()
    wait_for(lambda: node.pod("fits") is None, "the removed pod to be terminated")
    wait_for(lambda: node.try_status("/node")["resources"][GPU]["allocated"] == 0, "its devices to be freed")


def test_kubelet_restart_keeps_devices_and_does_not_readmit(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 4)
    node.wait_capacity(GPU, 4, 4)
    node.write_manifest("keep.yaml", pod_manifest("keep", {GPU: 2}))
    node.write_manifest("gone.yaml", pod_manifest("gone", {GPU: 1}))
    node.write_manifest("failed.yaml", pod_manifest("failed", {GPU: 9}))
    node.write_manifest(
        "done.yaml",
        pod_manifest("done", {GPU: 1}, extra_meta="\n  annotations: {kubedevice.io/phase: Succeeded}"),
    )
    keep = node.wait_phase("keep", "Running")
    node.wait_phase("gone", "Running")
    node.wait_phase("failed", "Failed")
    assert node.pod("done")["phase"] == "Succeeded"  # type: ignore[index]
    assert _alloc_count(node) == 2

    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    node.paths.manifests.joinpath("gone.yaml").unlink()  # removed while the daemon was down
    node.start_daemon()
    kept = node.wait_phase("keep", "Running")
    assert kept["containers"][0]["devices"] == keep["containers"][0]["devices"]
    assert node.pod("failed")["phase"] == "Failed"  # type: ignore[index]
    assert node.pod("gone") is None and node.pod("done")["phase"] == "Succeeded"  # type: ignore[index]
    # The plugin notices kubelet.sock was created again and registers; capacity returns.
    node.wait_capacity(GPU, 4, 4)
    status = node.node()
    assert status["resources"][GPU]["allocated"] == 2  # the gone pod's device was garbage-collected
    assert _alloc_count(node) == 0  # nothing was admitted again: no Allocate call in this process
    # A new pod gets the two free devices only.
    node.write_manifest("new.yaml", pod_manifest("new", {GPU: 2}))
    new = node.wait_phase("new", "Running")
    assert set(new["containers"][0]["devices"][GPU]).isdisjoint(keep["containers"][0]["devices"][GPU])


def test_plugin_death_and_return(node: NodeProcesses) -> None:
    node.start_daemon("--stop-grace-period", "1s")
    node.start_plugin(NIC, 2)
    node.wait_capacity(NIC, 2, 2)
    node.write_manifest("p.yaml", pod_manifest("p", {NIC: 1}))
    before = node.wait_phase("p", "Running")["containers"][0]["devices"]

    node.kill_plugin(NIC)
    dead = node.wait_capacity(NIC, 2, 0)  # unhealthy: capacity kept, allocatable 0
    assert dead["resources"][NIC]["endpoint"] == "stopped"
    assert dead["resources"][NIC]["unhealthy"] == ["fake-0", "fake-1"]
    assert 0.0 <= dead["resources"][NIC]["graceSecondsLeft"] <= 1.0
    health = node.pod("p")["containers"][0]["allocatedResourcesStatus"]  # type: ignore[index]
    assert {r["health"] for r in health[0]["resources"]} == {"Unknown"}
    node.wait_capacity(NIC, None)  # past the 1s grace period the resource is gone

    node.start_plugin(NIC, 2)
    node.wait_capacity(NIC, 2, 2)
    p = node.pod("p")
    assert p is not None and p["phase"] == "Running" and p["containers"][0]["devices"] == before
    assert {r["health"] for r in p["containers"][0]["allocatedResourcesStatus"][0]["resources"]} == {
        "Healthy"
    }


def test_status_says_where_plugins_register_while_none_has(node: NodeProcesses) -> None:
    node.start_daemon()
    out = run_cli("status", "--root-dir", str(node.root))
    assert out.returncode == 0, out.stderr
    hint = f"no device plugin has registered; plugins register at {node.paths.kubelet_socket}"
    assert hint in out.stdout.replace("\n", ""), out.stdout


def test_status_wait_for_waits_for_the_daemon_and_the_plugins_devices(node: NodeProcesses) -> None:
    waiting = subprocess.Popen(
        [*CLI, "status", "--root-dir", str(node.root), "--wait-for", GPU, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    node.start_daemon()  # the status call started before the daemon: it waits for it too
    wait_for(lambda: node.try_status("/node"), "the daemon to answer")
    assert waiting.poll() is None  # no plugin yet: still waiting
    node.start_plugin(GPU, 2)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    assert json.loads(out)["allocatable"] == {GPU: 2}

    late = run_cli(
        "status", "--root-dir", str(node.root), "--wait-for", GPU, "--wait-for", NIC, "--timeout", "0.2"
    )
    assert late.returncode == 1
    assert late.stderr.splitlines() == [
        f"error: status: {NIC}: no allocatable device after 0.2 s — start its plugin with --plugin-dir "
        f"{node.paths.plugin_dir} (`kubedevice status` shows what registered)"
    ]


def test_status_wait_for_a_daemon_that_never_answers() -> None:
    root = short_tmpdir()
    try:
        result = run_cli("status", "--root-dir", str(root), "--wait-for", GPU, "--timeout", "0.2")
    finally:
        root.rmdir()
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: status: cannot reach the node daemon at") and line.endswith(
        "after 0.2 s — start the daemon, then its plugins"
    ), line


BAD_MANIFESTS = {
    "yaml.yaml": ("kind: [", "YAML error"),
    "service.yaml": ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", 'unsupported kind "Service"'),
    "alpha.yaml": (
        "apiVersion: resource.k8s.io/v1alpha3\nkind: ResourceClaim\nmetadata: {name: c}\n",
        'kind ResourceClaim: apiVersion "resource.k8s.io/v1alpha3" is not supported '
        "(use resource.k8s.io/v1, v1beta2 or v1beta1)",
    ),
    "deployment.yaml": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
        'unsupported kind "Deployment" (apiVersion "apps/v1") — supported: Pod, Namespace, ResourceClaim, '
        "ResourceClaimTemplate, DeviceClass",
    ),
    "kindless.yaml": ("apiVersion: v1\nmetadata: {name: k}\n", "no kind"),
    "kind7.yaml": (pod_manifest("kind7", {GPU: 1}) + "---\nkind: 7\n", "document 2: no kind"),
    "half.yaml": (pod_manifest("half", {GPU: "500m"}), "not a whole number of devices"),
    "mismatch.yaml": (
        pod_manifest("mismatch", {GPU: 1}).replace(
            "      limits:", "      requests: {example.com/gpu: 2}\n      limits:"
        ),
        "requests (2) and limits (1) of example.com/gpu must be equal",
    ),
    "noname.yaml": (pod_manifest("x", {GPU: 1}).replace("  name: x\n", ""), "missing metadata.name"),
}


def test_bad_manifests_are_reported_and_touch_nothing_else(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 2)
    node.wait_capacity(GPU, 2, 2)
    node.write_manifest("good.yaml", pod_manifest("good", {GPU: 1}))
    node.wait_phase("good", "Running")
    outside = short_tmpdir("kd-outside-")
    try:
        (outside / "evil.yaml").write_text(pod_manifest("evil", {GPU: 1}))
        os.symlink(outside / "evil.yaml", node.paths.manifests / "evil.yaml")
        for file, (text, _) in BAD_MANIFESTS.items():
            node.write_manifest(file, text)
        expected = {
            **{f: why for f, (_, why) in BAD_MANIFESTS.items()},
            "evil.yaml": "outside the manifest folder",
        }

        def reported() -> dict[str, str] | None:
            errors = node.manifest_errors()
            return errors if set(errors) == set(expected) else None

        errors = wait_for(reported, "every bad manifest to be reported")
        for file, why in expected.items():
            assert why in errors[file], (file, errors[file])
        good = node.pod("good")
        assert good is not None and good["phase"] == "Running"
        assert {p["name"] for p in node.pods()} == {"good"}
        # A script iterating `pods --json`'s pods meets only pods; the bad files are under their own key,
        # and the table still shows them.
        listed = run_cli("pods", "--root-dir", str(node.root), "--json")
        answer = json.loads(listed.stdout)
        assert sorted(answer) == ["manifestErrors", "pods"]
        assert [(p["name"], p["phase"]) for p in answer["pods"]] == [("good", "Running")]
        assert {e["file"] for e in answer["manifestErrors"]} == set(expected)
        table = run_cli("pods", "--root-dir", str(node.root)).stdout
        assert all(f"bad manifest {file}: " in table for file in expected), table
        assert node.daemon is not None and node.daemon.poll() is None
        log = node.log("daemon")
        assert "manifest half.yaml: " in log and "manifest evil.yaml: symlink" in log

        # A fixed file is admitted and its report disappears.
        node.write_manifest("half.yaml", pod_manifest("half", {GPU: 1}))
        node.wait_phase("half", "Running")
        assert "half.yaml" not in node.manifest_errors()
    finally:
        for entry in outside.iterdir():
            entry.unlink()
        outside.rmdir()


def test_admission_wait_lets_a_pod_wait_for_its_plugin(node: NodeProcesses) -> None:
    node.start_daemon("--admission-wait", "30s")
    node.write_manifest("early.yaml", pod_manifest("early", {GPU: 1}))
    wait_for(lambda: node.pod("early"), "the pod to be seen")
    assert node.pod("early")["phase"] == "Pending"  # type: ignore[index]
    node.start_plugin(GPU, 1)
    node.wait_phase("early", "Running")


def test_refuses_a_served_kubelet_socket_and_stops_cleanly_on_sigterm(node: NodeProcesses) -> None:
    node.start_daemon()
    second = run_cli("node", "--root-dir", str(node.root))
    assert second.returncode == 2
    served = node.paths.kubelet_socket
    assert second.stderr.strip().splitlines() == [
        f"error: node: another process is serving {served}; is a node daemon already running?"
    ]
    assert node.kill_daemon(signal.SIGTERM) == 0
    assert not node.paths.status_socket.exists()


def test_a_stale_kubelet_socket_is_fine_and_sigint_stops(node: NodeProcesses) -> None:
    node.paths.plugin_dir.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(node.paths.kubelet_socket))
    stale.close()  # the file stays, nobody serves it
    node.start_daemon()
    assert node.kill_daemon(signal.SIGINT) == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ("node", "--stop-grace-period", "soon"),
            "error: node: --stop-grace-period: invalid duration 'soon'",
        ),
        (("node", "--admission-wait", "-1s"), "error: node: --admission-wait: duration '-1s' is negative"),
        (("node", "--http-addr", "localhost:http"), "error: node: --http-addr 'localhost:http'"),
        (
            ("node", "--log-level", "loud"),
            "error: node: --log-level must be one of debug, info, warning, error",
        ),
        (("status",), "error: status: cannot reach the node daemon at"),
        (("pods", "--json"), "error: pods: cannot reach the node daemon at"),
        (
            ("podresources", "list", "--socket", "/nonexistent/kubelet.sock"),
            "error: podresources list: nothing listens at /nonexistent/kubelet.sock — start",
        ),
        (
            ("podresources", "list", "--socket", "/etc/passwd"),
            "error: podresources list: /etc/passwd is not a socket — pass --socket",
        ),
    ],
)
def test_cli_errors_are_one_line_with_exit_2(args: tuple[str, ...], fragment: str) -> None:
    root = short_tmpdir()
    try:
        result = run_cli(*args, *(("--root-dir", str(root)) if args[0] != "podresources" else ()))
    finally:
        root.rmdir() if not any(root.iterdir()) else None
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(fragment), result.stderr


def test_status_api_over_tcp_and_http_errors(node: NodeProcesses) -> None:
    node.start_daemon("--http-addr", "0")
    match = wait_for(
        lambda: re.search(r"and http://127\.0\.0\.1:(\d+)", node.log("daemon")), "the TCP address"
    )
    with socket.create_connection(("127.0.0.1", int(match.group(1)))) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        metrics = s.makefile("rb").read()
    assert metrics.startswith(b"HTTP/1.1 200 OK") and b"kubedevice_node_pods" in metrics
    assert node.try_status("/healthz") == b"ok\n"
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(node.paths.status_socket))
        s.sendall(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = s.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 404 ") and b"no such path /nope" in answer
