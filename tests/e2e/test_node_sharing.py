"""`kubedevice plugin fake --replicas` beside the node daemon, both real processes: sharing end to end."""

from __future__ import annotations

import json
from collections import Counter

from tests.node_helpers import NodeProcesses, pod_manifest, wait_for

GPU = "example.com/gpu"


def _device_of(node: NodeProcesses, pod: str) -> str:
    [device] = node.wait_phase(pod, "Running")["containers"][0]["devices"][GPU]
    return str(device)


def test_twelve_one_replica_pods_share_four_devices_and_a_thirteenth_is_refused(node: NodeProcesses) -> None:
    health = node.root / "health.json"
    node.start_daemon()
    node.start_plugin(GPU, 4, "--replicas", "3", "--health-file", str(health))
    status = node.wait_capacity(GPU, 12, 12)
    assert status["resources"][GPU]["healthy"] == [f"fake-{i}::{k}" for i in range(4) for k in range(3)]

    # One at a time first: each new pod gets a replica of the least-used device, so four pods, four devices.
    for n in range(4):
        node.write_manifest(f"p{n}.yaml", pod_manifest(f"p{n}", {GPU: 1}))
        assert _device_of(node, f"p{n}") == f"fake-{n}::0"
    for n in range(4, 12):
        node.write_manifest(f"p{n}.yaml", pod_manifest(f"p{n}", {GPU: 1}))
    held = [_device_of(node, f"p{n}") for n in range(12)]
    assert sorted(held) == sorted(status["resources"][GPU]["healthy"])
    assert Counter(d.split("::")[0] for d in held) == {f"fake-{i}": 3 for i in range(4)}

    node.write_manifest("p12.yaml", pod_manifest("p12", {GPU: 1}))
    refused = node.wait_phase("p12", "Failed")
    assert refused["reason"] == "UnexpectedAdmissionError"
    assert (
        refused["message"] == f"requested number of devices unavailable for {GPU}. Requested: 1, Available: 0"
    )

    # Health is the physical device's: all three replicas of fake-1 turn at once.
    health.write_text(json.dumps(["fake-1"]))
    sick = node.wait_capacity(GPU, 12, 9)
    assert sick["resources"][GPU]["unhealthy"] == ["fake-1::0", "fake-1::1", "fake-1::2"]
    pods = {p["name"]: p for p in node.pods()}
    for name, pod in pods.items():
        statuses = pod["containers"][0]["allocatedResourcesStatus"]
        if name != "p12":
            [replica] = statuses[0]["resources"]
            assert replica["health"] == (
                "Unhealthy" if replica["resourceID"].startswith("fake-1::") else "Healthy"
            )

    # A freed replica is admitted again.
    node.paths.manifests.joinpath("p0.yaml").unlink()
    wait_for(lambda: node.pod("p0") is None, "p0 to be terminated")
    node.write_manifest("p13.yaml", pod_manifest("p13", {GPU: 1}))
    assert _device_of(node, "p13") == "fake-0::0"


def test_a_pod_asking_for_two_replicas_fails_when_the_plugin_refuses_multiple(node: NodeProcesses) -> None:
    shared = "example.com/gpu.shared"
    node.start_daemon()
    node.start_plugin(shared, 2, "--replicas", "2", "--refuse-multiple")
    node.wait_capacity(shared, 4, 4)
    node.write_manifest("two.yaml", pod_manifest("two", {shared: 2}))
    two = node.wait_phase("two", "Failed")
    assert two["reason"] == "UnexpectedAdmissionError"
    assert f"device plugin Allocate rpc for {shared} failed" in two["message"]
    assert (
        f"allocate: request for 2 {shared} replicas (fake-0::0, fake-1::0) refused: a container may get at "
        f"most 1 replica of a shared device — ask for {shared}: 1"
    ) in two["message"]
    # Nothing is held by the refused pod: a one-replica pod still gets the least-used device.
    node.write_manifest("one.yaml", pod_manifest("one", {shared: 1}))
    assert node.wait_phase("one", "Running")["containers"][0]["devices"][shared] == ["fake-0::0"]
