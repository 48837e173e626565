"""Health in the pod's status (KEP-4680) and shared devices on the node, with real processes: one daemon
for the module and one `kubedevice plugin fake --api both` (gpu-0..2 on the device plugin face, gpu-3..5 on
DRA) whose health comes from a file the tests rewrite. Claims carry user-written allocations."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator

import grpc.aio
import pytest

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.checkpoint import decode_dra
from tests.node_dra_helpers import DRIVER, GPU_CLASS, NODE, DRANodeProcesses, claim_yaml, pod_yaml
from tests.node_helpers import run_cli, short_tmpdir, wait_for

GPU = "example.com/gpu"
UID_H = "0b7e6a52-0000-4000-8000-0000000000a1"
UID_A = "0b7e6a52-0000-4000-8000-0000000000a2"
UID_B = "0b7e6a52-0000-4000-8000-0000000000a3"
CLAIM_A = "c1c1c1c1-0000-4000-8000-0000000000a2"
CLAIM_B = "c1c1c1c1-0000-4000-8000-0000000000a3"
SHARE_A = "5a5a5a5a-0000-4000-8000-000000000001"
SHARE_B = "5a5a5a5a-0000-4000-8000-000000000002"


@pytest.fixture(scope="module")
def node() -> Iterator[DRANodeProcesses]:
    n = DRANodeProcesses(short_tmpdir("kd-health-"))
    try:
        n.start_daemon()
        (n.root / "health.json").write_text("[]")
        n.start_dra_plugin(
            DRIVER,
            6,
            *("--api", "both", "--resource", GPU, "--poll-interval", "0.1"),
            *("--health-file", str(n.root / "health.json")),
        )
        n.wait_capacity(GPU, 3, 3)
        n.write_manifest("class.yaml", GPU_CLASS)
        yield n
    finally:
        n.close()


def _health(node: DRANodeProcesses, pod: str) -> list[dict[str, object]] | None:
    entry = node.pod(pod)
    return entry["containers"][0]["allocatedResourcesStatus"] if entry is not None else None


def _wait_health(node: DRANodeProcesses, pod: str, expected: list[dict[str, object]]) -> None:
    wait_for(lambda: _health(node, pod) == expected or None, f"{pod}'s health to read {expected}")


def _statuses(dp: str, dra: str) -> list[dict[str, object]]:
    return [
        {"name": GPU, "resources": [{"resourceID": "gpu-0", "health": dp}]},
        {"name": "claim:ch", "resources": [{"resourceID": f"{DRIVER}/gpu=gpu-3", "health": dra}]},
    ]


def test_health_of_both_paths_in_the_pod_status_follows_the_plugin(node: DRANodeProcesses) -> None:
    node.write_manifest("ch.yaml", claim_yaml("ch", "gpu-3"))
    node.write_manifest("h.yaml", pod_yaml("h", "ch", uid=UID_H, limits={GPU: 1}))
    assert node.wait_phase("h", "Running")["containers"][0]["devices"] == {GPU: ["gpu-0"]}
    # The device manager's entry first, then the claim's: a CDI ID names the DRA device.
    _wait_health(node, "h", _statuses("Healthy", "Healthy"))

    (node.root / "health.json").write_text(json.dumps(["gpu-0", "gpu-3"]))
    _wait_health(node, "h", _statuses("Unhealthy", "Unhealthy"))
    table = run_cli("pods", "--root-dir", str(node.root))
    assert table.returncode == 0, table.stderr
    assert "2 unhealthy of 2" in table.stdout
    assert f"default/h main: gpu-0 Unhealthy; {DRIVER}/gpu=gpu-3 Unhealthy" in table.stdout
    assert f"DRA driver {DRIVER}: health of {NODE}/gpu-3 changed, for pods {UID_H}" in node.log("daemon")

    (node.root / "health.json").write_text("[]")
    _wait_health(node, "h", _statuses("Healthy", "Healthy"))


def _shared_claim(name: str, uid: str, share: str) -> str:
    return claim_yaml(name, None, uid=uid) + (
        "status:\n  allocation:\n    devices:\n      results:\n"
        f"      - {{request: gpu, driver: {DRIVER}, pool: {NODE}, device: gpu-4, shareID: {share}}}\n"
    )


def _claim_resources(node: DRANodeProcesses) -> dict[str, list[tuple[str, str, list[str]]]]:
    """pod -> (device, share ID, CDI IDs) of its container's claims, from PodResources' List."""

    async def call() -> list[pr.PodResources]:
        async with grpc.aio.insecure_channel(f"unix://{node.paths.pod_resources_socket}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            return list((await stub.List(pr.ListPodResourcesRequest(), timeout=5)).pod_resources)

    return {
        p.name: [
            (r.device_name, r.share_id, [c.name for c in r.cdi_devices])
            for d in p.containers[0].dynamic_resources
            for r in d.claim_resources
        ]
        for p in asyncio.run(call())
        if p.name in ("pa", "pb")
    }


def _checkpoint_shares(node: DRANodeProcesses) -> dict[str, list[str | None]]:
    data = decode_dra((node.root / "dra_manager_state").read_bytes())
    return {
        c.claim_name: [d.share_id for devices in (c.driver_state or {}).values() for d in devices or ()]
        for c in data.claims or ()
        if c.claim_name in ("ca", "cb")
    }


def _share_cdi(claim: str, share: str) -> str:
    return f"{DRIVER}/claim={claim}-{share}"


def test_two_claims_sharing_a_device_live_apart(node: DRANodeProcesses) -> None:
    node.write_manifest("ca.yaml", _shared_claim("ca", CLAIM_A, SHARE_A))
    node.write_manifest("cb.yaml", _shared_claim("cb", CLAIM_B, SHARE_B))
    node.write_manifest("pa.yaml", pod_yaml("pa", "ca", uid=UID_A))
    node.write_manifest("pb.yaml", pod_yaml("pb", "cb", uid=UID_B))
    pa, pb = node.wait_phase("pa", "Running"), node.wait_phase("pb", "Running")
    # The device's own CDI ID, then a CDI device of each share's own.
    physical = f"{DRIVER}/gpu=gpu-4"
    assert pa["containers"][0]["cdiDevices"] == [physical, _share_cdi(CLAIM_A, SHARE_A)]
    assert pb["containers"][0]["cdiDevices"] == [physical, _share_cdi(CLAIM_B, SHARE_B)]
    assert pa["containers"][0]["claims"][0]["devices"] == [
        {"driver": DRIVER, "pool": NODE, "device": "gpu-4", "shareID": SHARE_A}
    ]
    spec = json.loads((node.root / "cdi" / f"kubedevice-{DRIVER}-{CLAIM_A}.json").read_text())
    assert [(d["name"], d["containerEdits"]["env"]) for d in spec["devices"]] == [
        (f"{CLAIM_A}-{SHARE_A}", [f"KUBEDEVICE_SHARE_GPU_4={SHARE_A}"])
    ]
    # Both report the health of the one device they share, under its one resource ID.
    for pod in ("pa", "pb"):
        claim = "claim:ca" if pod == "pa" else "claim:cb"
        _wait_health(
            node, pod, [{"name": claim, "resources": [{"resourceID": physical, "health": "Healthy"}]}]
        )
    expected = {
        "pa": [("gpu-4", SHARE_A, [physical, _share_cdi(CLAIM_A, SHARE_A)])],
        "pb": [("gpu-4", SHARE_B, [physical, _share_cdi(CLAIM_B, SHARE_B)])],
    }
    assert _claim_resources(node) == expected
    assert _checkpoint_shares(node) == {"ca": [SHARE_A], "cb": [SHARE_B]}

    # A restart restores both shares from dra_manager_state.
    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    node.start_daemon()
    for pod in ("pa", "pb"):
        node.wait_phase(pod, "Running")
    assert _claim_resources(node) == expected
    assert _checkpoint_shares(node) == {"ca": [SHARE_A], "cb": [SHARE_B]}

    # One pod goes: only its claim is unprepared; the other share stays, on disk too.
    prepared_before = len(node.events("unprepare"))
    (node.paths.manifests / "pa.yaml").unlink()
    node.wait_gone("pa")
    wait_for(lambda: len(node.events("unprepare")) > prepared_before or None, "ca to be unprepared")
    assert [e["uid"] for e in node.events("unprepare")[prepared_before:]] == [CLAIM_A]
    assert _checkpoint_shares(node) == {"cb": [SHARE_B]}
    assert not (node.root / "cdi" / f"kubedevice-{DRIVER}-{CLAIM_A}.json").exists()
    assert (node.root / "cdi" / f"kubedevice-{DRIVER}-{CLAIM_B}.json").exists()
    assert node.pod("pb")["phase"] == "Running"  # type: ignore[index]
    assert _claim_resources(node) == {"pb": expected["pb"]}


def test_a_share_id_that_is_no_uuid_is_refused(node: DRANodeProcesses) -> None:
    node.write_manifest("bad.yaml", _shared_claim("bad", CLAIM_A.replace("a2", "ff"), "share-1"))
    error = wait_for(lambda: node.manifest_errors().get("bad.yaml"), "bad.yaml to be refused")
    assert error == (
        "ResourceClaim default/bad: status.allocation.devices.results[0].shareID: "
        "must be a lowercase UUID (8-4-4-4-12 hex digits), not 'share-1'"
    )
