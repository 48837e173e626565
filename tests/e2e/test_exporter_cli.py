"""`kubedevice exporter` as a process beside the node daemon and `fake` plugins (real sockets, real HTTP).

Its device series must say exactly what `kubedevice pods --json` says, as pods come and go, a plugin dies
and the daemon restarts; while the daemon is away it keeps serving the last data with the error counted.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node_helpers import (
    CLI,
    DEADLINE_S,
    TRAINER_POD,
    WEB_POD,
    NodeProcesses,
    node_processes,
    run_cli,
    wait_for,
)
from tests.prometheus_text import Samples, held_devices, parse_samples, sample_value

GPU = "example.com/gpu"
NIC = "example.com/nic"
#: Init containers without restartPolicy Always: the kubelet's PodResources does not list them.
PLAIN_INIT = {"setup"}


class Exporter:
    def __init__(self, node: NodeProcesses) -> None:
        self.log_path = node.root / "exporter.log"
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                *CLI,
                "exporter",
                "--podresources-socket",
                str(node.paths.pod_resources_socket),
                "--checkpoint",
                str(node.paths.checkpoint),
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "0.2",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        self.url = wait_for(self._url, "the exporter to listen")

    def _url(self) -> str | None:
        assert self.proc.poll() is None, self.log_path.read_text()
        match = re.search(r"serving (http://\S+/metrics)", self.log_path.read_text())
        return match.group(1) if match else None

    def samples(self) -> Samples:
        with urllib.request.urlopen(self.url, timeout=5) as answer:
            return parse_samples(answer.read().decode())

    def value(self, name: str, **labels: str) -> float | None:
        return sample_value(self.samples(), name, **labels)

    def held(self) -> set[tuple[str, ...]]:
        return held_devices(self.samples())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=DEADLINE_S)
        self._log.close()


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    yield from node_processes()


@pytest.fixture
def exporter(node: NodeProcesses) -> Iterator[Exporter]:
    node.start_daemon()
    node.start_plugin(GPU, 6, "--numa-nodes", "2")
    node.start_plugin(NIC, 2)
    node.wait_capacity(GPU, 6, 6)
    node.wait_capacity(NIC, 2, 2)
    e = Exporter(node)
    try:
        yield e
    finally:
        e.close()


def _numa(resource: str, device: str) -> str:
    # The fake plugin's round-robin layout over 2 NUMA nodes; the NIC plugin reports no topology.
    return str(int(device.rsplit("-", 1)[1]) % 2) if resource == GPU else ""


def _from_pods_json(node: NodeProcesses) -> set[tuple[str, ...]]:
    """What `kubedevice pods --json` says the listed containers hold, as the exporter's labels."""
    result = run_cli("pods", "--root-dir", str(node.root), "--json")
    assert result.returncode == 0, result.stderr
    out: set[tuple[str, ...]] = set()
    for pod in json.loads(result.stdout)["pods"]:
        if pod.get("phase") not in ("Pending", "Running"):
            continue
        for c in pod["containers"]:
            if c["name"] in PLAIN_INIT:
                continue
            for resource, ids in c["devices"].items():
                out.update(
                    (pod["namespace"], pod["name"], c["name"], resource, d, _numa(resource, d)) for d in ids
                )
    return out


def _matches(node: NodeProcesses, exporter: Exporter, want_pods: set[str]) -> set[tuple[str, ...]] | None:
    expected = _from_pods_json(node)
    if {e[1] for e in expected} != want_pods:
        return None
    return expected if exporter.held() == expected else None


def test_series_follow_pods_plugin_death_and_daemon_restart(node: NodeProcesses, exporter: Exporter) -> None:
    node.write_manifest("trainer.yaml", TRAINER_POD)
    node.write_manifest("web.yaml", WEB_POD)
    node.wait_phase("trainer", "Running")
    node.wait_phase("web", "Running")
    both = wait_for(lambda: _matches(node, exporter, {"trainer", "web"}), "series == pods --json (2 pods)")
    assert {e[2] for e in both} == {"sidecar", "train", "main"}
    assert exporter.value("kubedevice_allocatable_devices", resource=GPU) == 6
    assert exporter.value("kubedevice_allocated_devices", resource=GPU) == 4
    assert exporter.value("kubedevice_free_devices", resource=GPU) == 2
    wait_for(lambda: exporter.value("kubedevice_checkpoint_verified") == 1, "the checkpoint to verify")
    assert exporter.value("kubedevice_checkpoint_entries") == 5  # setup, sidecar, train, and web's two

    (node.paths.manifests / "trainer.yaml").unlink()
    wait_for(lambda: _matches(node, exporter, {"web"}), "series == pods --json after trainer went")

    node.kill_plugin(NIC)
    wait_for(
        lambda: exporter.value("kubedevice_allocated_unallocatable_devices", resource=NIC) == 1,
        "web's NIC to leave allocatable once its plugin died",
    )
    assert exporter.value("kubedevice_allocatable_devices", resource=NIC) == 0
    held = wait_for(lambda: _matches(node, exporter, {"web"}), "series == pods --json after the plugin died")

    node.kill_daemon()
    wait_for(lambda: exporter.value("kubedevice_exporter_podresources_up") == 0, "the exporter to notice")
    errors = {s["kind"]: v for s, v in exporter.samples()["kubedevice_exporter_errors_total"] if v > 0}
    assert set(errors) <= {"refused", "missing"} and errors
    assert exporter.held() == held  # the last good data, still served

    node.start_daemon()
    node.wait_phase("web", "Running")
    wait_for(
        lambda: exporter.value("kubedevice_exporter_podresources_up") == 1, "PodResources to answer again"
    )
    assert (
        wait_for(lambda: _matches(node, exporter, {"web"}), "series == pods --json after the restart") == held
    )


def test_usage_errors_are_one_line_with_exit_2(tmp_path: Path) -> None:
    for args, what in (
        (("--interval", "0.01"), "--interval '0.01' is shorter than 0.2s"),
        (("--interval", "soon"), "invalid duration 'soon'"),
        (("--listen", "localhost:http"), "--listen 'localhost:http': expected HOST:PORT"),
    ):
        result = run_cli("exporter", *args)
        assert result.returncode == 2, result
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("error: exporter: ") and what in result.stderr, result.stderr
        assert " — " in result.stderr


def test_a_busy_listen_address_is_one_line_with_exit_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli(
            "exporter",
            "--listen",
            f"127.0.0.1:{port}",
            "--podresources-socket",
            str(tmp_path / "none.sock"),
            "--checkpoint",
            str(tmp_path / "none"),
        )
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: exporter: cannot listen on 127.0.0.1:{port}: ")
    assert "Traceback" not in result.stderr
