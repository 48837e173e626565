"""DRA-backed extended resources in the node daemon, with real processes: `limits: example.com/gpu: 1` met
by the fake DRA driver through a DeviceClass when no device plugin serves the name, by the device plugin
when one is registered; the decision recorded and kept across a restart."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import grpc.aio
import pytest

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from tests.node_dra_helpers import DRIVER, GPU_CLASS, DRANodeProcesses, dra_node_processes, pod_yaml
from tests.node_helpers import wait_for

P = "0b7e6a52-0000-4000-8000-0000000000e1"
Q = "0b7e6a52-0000-4000-8000-0000000000e2"
R = "0b7e6a52-0000-4000-8000-0000000000e3"
EXTENDED_CLASS = GPU_CLASS + "  extendedResourceName: example.com/gpu\n"
WARNING = (
    "extended resource example.com/gpu is offered by a device plugin and by DeviceClass gpu; "
    "the device plugin serves it"
)


TWO_CONTAINERS = """apiVersion: v1
kind: Pod
metadata: {name: two}
spec:
  containers:
  - name: a
    resources: {limits: {example.com/gpu: 1}}
  - name: b
    resources: {limits: {example.com/gpu: 1}}
"""


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def _pod_resources(node: DRANodeProcesses, name: str) -> pr.PodResources:
    async def call() -> pr.PodResources:
        async with grpc.aio.insecure_channel(f"unix://{node.paths.pod_resources_socket}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            request = pr.GetPodResourcesRequest(pod_name=name, pod_namespace="default")
            return (await stub.Get(request, timeout=5)).pod_resources

    return asyncio.run(call())


def _mapping(resource: str) -> list[dict[str, str]]:
    return [{"containerName": "main", "resourceName": resource, "requestName": "container-0-request-0"}]


def test_an_extended_resource_met_by_dra_then_by_a_device_plugin_registered_later(
    node: DRANodeProcesses,
) -> None:
    """Scenarios 25 and 26: no device plugin, so the special claim, one prepare and the CDI device; the
    class's implicit name too; after a restart the decision stands while a device plugin now serves the
    name to new pods, and /node warns of the two sources."""
    node.start_daemon()
    node.start_dra_plugin(DRIVER, 4)
    node.write_manifest("class.yaml", EXTENDED_CLASS)
    node.write_manifest("p.yaml", pod_yaml("p", uid=P, limits={"example.com/gpu": 1}))
    pod = node.wait_phase("p", "Running")

    status = pod["extendedResourceClaimStatus"]
    special = status["resourceClaimName"]
    assert re.fullmatch(r"p-extended-resources-[a-z0-9]{5}", special), special
    assert status["requestMappings"] == _mapping("example.com/gpu")
    assert pod["status"] == {"extendedResourceClaimStatus": status}  # the API's pod status, no template claim
    main = pod["containers"][0]
    # The device manager was not asked: no device, no "no plugin serves" warning.
    assert (main["devices"], pod["warnings"]) == ({}, [])
    assert main["cdiDevices"] == [f"{DRIVER}/gpu=gpu-0"]
    assert [c["claim"] for c in main["claims"]] == [f"default/{special}"]
    assert [e["claim"] for e in node.events("prepare")] == [f"default/{special}"]

    claim = node.try_status(f"/claims/default/{special}")
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Pod", "p", P, True)
    (request,) = claim["spec"]["devices"]["requests"]
    assert request == {
        "name": "container-0-request-0",
        "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
    }
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "container-0-request-0", "driver": DRIVER, "pool": "node-1", "device": "gpu-0"}
    ]
    listed = node.claim(special)
    assert listed is not None and listed["extendedFor"] == P
    recorded = json.loads((node.root / "dra_claims.json").read_text())["claims"][f"default/{special}"]
    assert (recorded["extendedFor"], recorded["extendedResources"]) == (P, {"example.com/gpu": "gpu"})

    (container,) = _pod_resources(node, "p").containers
    assert list(container.devices) == []
    (dynamic,) = container.dynamic_resources
    assert (dynamic.claim_name, [r.device_name for r in dynamic.claim_resources]) == (special, ["gpu-0"])

    # Every class is an extended resource under its implicit name too.
    implicit = "deviceclass.resource.kubernetes.io/gpu"
    node.write_manifest("q.yaml", pod_yaml("q", uid=Q, limits={implicit: 1}))
    q = node.wait_phase("q", "Running")
    assert q["extendedResourceClaimStatus"]["requestMappings"] == _mapping(implicit)
    assert q["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-1"]
    assert node.node()["extendedResourceWarnings"] == []
    # No class maps the name: the device manager's path, as for any name no plugin serves.
    missing = "deviceclass.resource.kubernetes.io/missing"
    node.write_manifest("n.yaml", pod_yaml("n", limits={missing: 1}))
    n = node.wait_phase("n", "Running")
    assert (n["extendedResourceClaimStatus"], n["status"]) == (None, {})
    assert n["warnings"] == [f"{missing}: no plugin serves this resource; the container runs without it"]

    # Two containers: a request each, each container given its own device only.
    node.write_manifest("two.yaml", TWO_CONTAINERS)
    two = node.wait_phase("two", "Running")
    two_claim = two["extendedResourceClaimStatus"]["resourceClaimName"]
    assert two["extendedResourceClaimStatus"]["requestMappings"] == [
        {"containerName": "a", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"},
        {"containerName": "b", "resourceName": "example.com/gpu", "requestName": "container-1-request-0"},
    ]
    assert [c["cdiDevices"] for c in two["containers"]] == [[f"{DRIVER}/gpu=gpu-2"], [f"{DRIVER}/gpu=gpu-3"]]
    # PodResources lists the special claim, with all its devices, for each mapped container.
    for container in _pod_resources(node, "two").containers:
        (dynamic,) = container.dynamic_resources
        assert dynamic.claim_name == two_claim
        assert [r.device_name for r in dynamic.claim_resources] == ["gpu-2", "gpu-3"]

    # Every device is taken: a pod wanting two waits, and says why.
    node.write_manifest("big.yaml", pod_yaml("big", limits={"example.com/gpu": 2}))
    big = node.wait_message("big", "cannot allocate all claims")
    big_claim = big["extendedResourceClaimStatus"]["resourceClaimName"]
    assert (big["phase"], big["reason"], big["message"]) == (
        "Pending",
        "Unschedulable",
        f'cannot allocate all claims: ResourceClaim default/{big_claim}, request "container-0-request-0": '
        "2 matching device(s) wanted, 0 free",
    )

    # A restart keeps the decisions, with no prepare call; a device plugin for the name registers after.
    assert node.kill_daemon(2) == 0
    node.start_daemon()
    again = node.wait_phase("p", "Running")
    assert again["extendedResourceClaimStatus"] == status
    assert again["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-0"]
    node.start_plugin("example.com/gpu", 2)
    node.wait_capacity("example.com/gpu", 2)
    assert node.node()["extendedResourceWarnings"] == [WARNING]
    # The waiting pod keeps its DRA decision though a device plugin now has two free devices.
    assert (
        node.wait_message("big", big["message"])["extendedResourceClaimStatus"]["resourceClaimName"]
        == big_claim
    )

    # Scenario 26: a new pod of the name goes to the device plugin; no special claim, no prepare.
    node.write_manifest("r.yaml", pod_yaml("r", uid=R, limits={"example.com/gpu": 1}))
    r = node.wait_phase("r", "Running")
    assert r["extendedResourceClaimStatus"] is None
    assert [len(ids) for ids in r["containers"][0]["devices"].values()] == [1]
    assert r["containers"][0]["claims"] == [] and r["resourceClaims"] == []
    assert len(node.events("prepare")) == 3 and node.events("prepare-cached") == []  # p, q, two
    # p still holds its DRA device, not a device plugin's.
    assert node.pod("p")["containers"][0]["devices"] == {}  # type: ignore[index]

    # Its pod gone, the special claim is unprepared and deleted.
    (node.paths.manifests / "p.yaml").unlink()
    node.wait_gone("p")
    wait_for(lambda: node.claim(special) is None, "the special claim to be deleted")
    assert [e["claim"] for e in node.events("unprepare")] == [f"default/{special}"]
