"""The exporter and `top` with DRA, against a real daemon and a real fake DRA driver: a claim of two
devices of one driver shared by two pods (PodResources repeats the first device's CDI ID on the second,
the kubelet's quirk) and a pod with a claim per container; each device and CDI ID is counted once."""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from tests.node_dra_helpers import DRIVER, NODE, DRANodeProcesses, claim_yaml, dra_node_processes, pod_yaml
from tests.node_helpers import CLI, DEADLINE_S, run_cli, wait_for
from tests.prometheus_text import Samples, parse_samples, sample_value

#: Claim `pair`: gpu-0 and gpu-1 for one request.
PAIR = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: pair, uid: 7a7a7a7a-0000-4000-8000-000000000001}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu, allocationMode: ExactCount, count: 2}}
status:
  allocation:
    devices:
      results:
      - {{request: gpu, driver: {DRIVER}, pool: {NODE}, device: gpu-0}}
      - {{request: gpu, driver: {DRIVER}, pool: {NODE}, device: gpu-1}}
"""
#: Pod `split`: container `one` uses claim c2 (gpu-2), container `two` claim c3 (gpu-3).
SPLIT = """apiVersion: v1
kind: Pod
metadata: {name: split}
spec:
  resourceClaims:
  - {name: c2, resourceClaimName: c2}
  - {name: c3, resourceClaimName: c3}
  containers:
  - name: one
    resources: {claims: [{name: c2}]}
  - name: two
    resources: {claims: [{name: c3}]}
"""


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def _samples(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return parse_samples(answer.read().decode())


def _dra_info(samples: Samples) -> set[tuple[str, ...]]:
    keys = ("pod", "container", "claim", "device")
    return {tuple(labels[k] for k in keys) for labels, v in samples.get("kubedevice_pod_dra_device_info", [])}


def test_exporter_and_top_show_the_claims_devices_once(node: DRANodeProcesses) -> None:
    node.start_daemon()
    node.start_dra_plugin(devices=4)
    claims = "---\n".join([PAIR, claim_yaml("c2", "gpu-2"), claim_yaml("c3", "gpu-3")])
    node.write_manifest("claims.yaml", claims)
    node.write_manifest("a.yaml", pod_yaml("a", "pair"))
    node.write_manifest("b.yaml", pod_yaml("b", "pair"))
    node.write_manifest("split.yaml", SPLIT)
    for name in ("a", "b", "split"):
        node.wait_phase(name, "Running")

    log_path = node.root / "exporter.log"
    with log_path.open("ab") as log:
        exporter = subprocess.Popen(
            [
                *CLI,
                *("exporter", "--podresources-socket", str(node.paths.pod_resources_socket)),
                *("--checkpoint", str(node.paths.checkpoint), "--listen", "127.0.0.1:0"),
                *("--interval", "0.2"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:
        match = wait_for(lambda: re.search(r"serving (http://\S+/metrics)", log_path.read_text()), "exporter")
        url = match.group(1)
        expected = {
            ("a", "main", "pair", "gpu-0"),
            ("a", "main", "pair", "gpu-1"),
            ("b", "main", "pair", "gpu-0"),
            ("b", "main", "pair", "gpu-1"),
            ("split", "one", "c2", "gpu-2"),
            ("split", "two", "c3", "gpu-3"),
        }

        def complete() -> Samples | None:
            samples = _samples(url)
            return samples if _dra_info(samples) == expected else None

        samples = wait_for(complete, "the claims' devices in the exporter's series")
        assert sample_value(samples, "kubedevice_dra_allocated_devices", driver=DRIVER, pool=NODE) == 4
        # The pair's two devices give two CDI IDs, though PodResources lists gpu-0's twice.
        for claim, ids in (("pair", 2), ("c2", 1), ("c3", 1)):
            labels = {"namespace": "default", "claim": claim, "driver": DRIVER}
            assert sample_value(samples, "kubedevice_dra_claim_cdi_devices", **labels) == ids, claim
    finally:
        exporter.send_signal(signal.SIGTERM)
        exporter.wait(timeout=DEADLINE_S)

    daemon = run_cli("top", "--root-dir", str(node.root))
    assert daemon.returncode == 0, daemon.stderr
    lines = [line.rstrip() for line in daemon.stdout.splitlines()]
    assert f"{DRIVER} (DRA)  4 devices: 4 held, 0 free, 0 unhealthy" in lines, daemon.stdout
    # Pods a, b, split are 1, 2, 3: the pair's devices are held by a and b both.
    assert "  no NUMA  1,2 1,2   3   3" in lines, daemon.stdout
    assert any(line.endswith(f"{DRIVER}: {NODE}/gpu-2 (claim c2)") for line in lines), daemon.stdout
    socket = run_cli("top", "--socket", str(node.paths.pod_resources_socket))
    assert socket.returncode == 0, socket.stderr
    lines = [line.rstrip() for line in socket.stdout.splitlines()]
    assert f"{DRIVER} (DRA)  4 devices listed: 4 held, 0 free" in lines, socket.stdout
    assert "  no NUMA  1,2 1,2   3   3" in lines, socket.stdout
