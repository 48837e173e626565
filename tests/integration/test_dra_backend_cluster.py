"""Cluster mode against a stand-in API server (tests/dra_apiserver.py) reached through a kubeconfig:
what the backend creates, updates and deletes, the Node owner, the 128 split, generations, the watch
that puts deleted or changed slices back, retries after failures, and claims."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.resource_v1 import (
    AllocatedDeviceStatus,
    AllocationResult,
    DeviceAllocationResult,
    DeviceClaim,
    DeviceRequest,
    DeviceRequestAllocationResult,
    ExactDeviceRequest,
    ResourceClaimSpec,
    ResourceClaimStatus,
)
from lightkube.resources.resource_v1 import ResourceClaim

from kubedevice.backoff import Backoff
from kubedevice.plugin.dra.backend import DRABackendError, make_backend
from kubedevice.plugin.dra.backend.cluster import ClusterBackend
from kubedevice.plugin.dra.backend_api import ClaimFetchError, PublishedDevice
from kubedevice.plugin.dra.device_model import CounterSet, DeviceCounterConsumption, DeviceTaint
from tests.dra_apiserver import ApiServer
from tests.waiting import poll_async

DRIVER = "gpu.example.com"
NODE = "node-1"
FAST = Backoff(initial=0.02, cap=0.1)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KUBERNETES_SERVICE_HOST", "NODE_NAME", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    # The stand-in is on loopback: no proxy may take the requests.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    server = ApiServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def backend(api: ApiServer, tmp_path: Path) -> AsyncIterator[ClusterBackend]:
    api.add_node(NODE)
    b = ClusterBackend(
        driver_name=DRIVER, node_name=NODE, kubeconfig=str(api.kubeconfig(tmp_path)), backoff=FAST
    )
    await b.start()
    yield b
    await b.stop()


def gpus(count: int, **capacity: str) -> list[PublishedDevice]:
    return [
        PublishedDevice(id=f"gpu-{i}", attributes={"index": i}, capacity=capacity, numa_nodes=(i % 2,))
        for i in range(count)
    ]


def pool_state(api: ApiServer) -> tuple[set[int], list[int]]:
    """The generations present and the device counts of the slices, largest first."""
    slices = api.slice_json()
    sizes = sorted((len(s["spec"].get("devices") or []) for s in slices), reverse=True)
    return {s["spec"]["pool"]["generation"] for s in slices}, sizes


async def settled(api: ApiServer, backend: ClusterBackend, generation: int, sizes: list[int]) -> None:
    """Wait until the API server holds these slices and the backend has had the answers to its writes.

    The server shows a slice before its answer reaches the backend, which records the generation only
    once the pass's calls returned: waiting for the server alone would read the backend too early.
    """

    async def done() -> bool:
        return pool_state(api) == ({generation}, sizes) and backend.generation == generation

    await poll_async(done, f"slices of generation {generation} with {sizes} devices")


async def quiet_pass(backend: ClusterBackend) -> None:
    """Wait until a publishing pass has run after now."""
    before = backend.passes
    await poll_async(lambda: backend.passes > before, "a publishing pass")


async def test_publishes_one_slice_owned_by_the_node(api: ApiServer, backend: ClusterBackend) -> None:
    node_uid = api.nodes[NODE].metadata.uid  # type: ignore[union-attr]
    await backend.publish(gpus(2, memory="16Gi"))
    await settled(api, backend, 1, [2])
    (item,) = api.slice_json()
    metadata = item["metadata"]
    assert metadata["generateName"] == f"{NODE}-{DRIVER}-"
    assert (
        metadata["name"].startswith(f"{NODE}-{DRIVER}-") and len(metadata["name"]) == len(NODE + DRIVER) + 7
    )
    assert metadata["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid, "controller": True}
    ]
    assert item["spec"] == {
        "driver": DRIVER,
        "nodeName": NODE,
        "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "deviceID": {"string": f"gpu-{i}"},
                    "numaNode": {"int": i},
                    "index": {"int": i},
                },
                "capacity": {"memory": {"value": "16Gi"}},
            }
            for i in range(2)
        ],
    }
    # The Node was read once, for its uid, and the list/watch asked only for this driver on this node.
    assert [r.path for r in api.log if r.path.startswith("/api/v1/nodes")] == [f"/api/v1/nodes/{NODE}"]
    selectors = {r.query.get("fieldSelector") for r in api.log if r.path.endswith("/resourceslices")}
    assert selectors == {f"spec.driver={DRIVER},spec.nodeName={NODE}", None}  # None: the POST


async def test_same_content_writes_nothing_even_with_canonical_quantities(
    api: ApiServer, backend: ClusterBackend
) -> None:
    # The API server sends "0.5Gi" back as "512Mi": the same value, so no change.
    await backend.publish(gpus(3, memory="0.5Gi"))
    await settled(api, backend, 1, [3])
    assert api.slice_json()[0]["spec"]["devices"][0]["capacity"] == {"memory": {"value": "512Mi"}}
    writes = api.writes()
    await backend.publish(gpus(3, memory="0.5Gi"))
    await quiet_pass(backend)
    assert api.writes() == writes
    assert backend.generation == 1


async def test_split_at_128_bumps_generations_reuses_and_deletes(
    api: ApiServer, backend: ClusterBackend
) -> None:
    await backend.publish(gpus(2))
    await settled(api, backend, 1, [2])
    (first,) = api.slice_json()
    await backend.publish(gpus(300))
    await settled(api, backend, 2, [128, 128, 44])
    slices = api.slice_json()
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {3}
    # The first slice was updated in place; two were created.
    assert first["metadata"]["name"] in [s["metadata"]["name"] for s in slices]
    names = [d["name"] for s in slices for d in s["spec"]["devices"]]
    assert sorted(names) == sorted(f"gpu-{i}" for i in range(300))
    assert [m for m, _ in api.writes()].count("POST") == 3

    await backend.publish(gpus(10))
    await settled(api, backend, 3, [10])
    assert [m for m, _ in api.writes()].count("DELETE") == 2


async def test_a_deleted_slice_is_published_again(api: ApiServer, backend: ClusterBackend) -> None:
    await backend.publish(gpus(130))
    await settled(api, backend, 1, [128, 2])
    victim = api.slice_json()[1]["metadata"]["name"]
    await api.delete_slice(victim)
    await settled(api, backend, 2, [128, 2])
    assert victim not in api.slices
    devices = sorted(d["name"] for s in api.slice_json() for d in s["spec"]["devices"])
    assert devices == sorted(f"gpu-{i}" for i in range(130))

    # All gone (the kubelet's wipe): back again, with a higher generation than before.
    for name in list(api.slices):
        await api.delete_slice(name)
    await settled(api, backend, 3, [128, 2])


async def test_a_slice_changed_elsewhere_is_put_back(api: ApiServer, backend: ClusterBackend) -> None:
    await backend.publish(gpus(2))
    await settled(api, backend, 1, [2])
    edited = api.slice_json()[0]
    edited["spec"]["devices"] = edited["spec"]["devices"][:1]
    await api.put_slice(edited)
    await settled(api, backend, 2, [2])


async def test_stale_slices_of_an_earlier_instance_are_replaced(api: ApiServer, tmp_path: Path) -> None:
    node_uid = api.add_node(NODE)
    owner = {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid, "controller": True}
    for name, pool, generation in (("old-a", NODE, 5), ("old-b", NODE, 4), ("other-pool", "elsewhere", 1)):
        await api.put_slice(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": name, "ownerReferences": [owner]},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": NODE,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                    "devices": [{"name": "gone-0"}],
                },
            }
        )
    b = ClusterBackend(
        driver_name=DRIVER, node_name=NODE, kubeconfig=str(api.kubeconfig(tmp_path)), backoff=FAST
    )
    await b.start()
    try:
        await b.publish(gpus(1))
        await settled(api, b, 6, [1])
        assert list(api.slices) == ["old-a"]  # reused: the newest generation's slice
    finally:
        await b.stop()


async def test_failures_are_retried_with_backoff(
    api: ApiServer, backend: ClusterBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kubedevice.plugin.dra.backend.cluster")
    api.faults += [("POST", 500), ("POST", 503)]
    await backend.publish(gpus(2))
    await settled(api, backend, 1, [2])  # the failed passes used up no generation
    failures = [r.getMessage() for r in caplog.records if "publishing the ResourceSlices" in r.getMessage()]
    assert failures == [
        f"publishing the ResourceSlices of {DRIVER} failed: injected fault; trying again in 0.02 s",
        f"publishing the ResourceSlices of {DRIVER} failed: injected fault; trying again in 0.04 s",
    ]
    # A conflicting update (someone wrote in between) is a failed pass too: read again, write again.
    api.faults.append(("PUT", 409))
    await backend.publish(gpus(3))
    await settled(api, backend, 2, [3])
    assert api.faults == []


def gpu_claim() -> ResourceClaim:
    return ResourceClaim(
        apiVersion="resource.k8s.io/v1",
        kind="ResourceClaim",
        metadata=ObjectMeta(name="c1", namespace="ml"),
        spec=ResourceClaimSpec(
            devices=DeviceClaim(
                requests=[DeviceRequest(name="gpu", exactly=ExactDeviceRequest(deviceClassName="gpu"))]
            )
        ),
        status=ResourceClaimStatus(
            allocation=AllocationResult(
                devices=DeviceAllocationResult(
                    results=[
                        DeviceRequestAllocationResult(device="gpu-0", driver=DRIVER, pool=NODE, request="gpu")
                    ]
                )
            )
        ),
    )


async def test_claims(api: ApiServer, backend: ClusterBackend) -> None:
    claim = gpu_claim()
    api.add_claim(claim)
    got: dict[str, Any] = await backend.get_claim("ml", "c1")
    assert got == claim.to_dict()
    assert got["status"]["allocation"]["devices"]["results"] == [
        {"device": "gpu-0", "driver": DRIVER, "pool": NODE, "request": "gpu"}
    ]
    with pytest.raises(ClaimFetchError) as err:
        await backend.get_claim("ml", "nope")
    assert str(err.value) == 'resourceclaims.resource.k8s.io "nope" not found'


async def test_mode_choice_and_start_errors(
    api: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = str(api.kubeconfig(tmp_path))
    with pytest.raises(DRABackendError) as no_name:
        make_backend(kubelet_dir=tmp_path, driver_name=DRIVER, kubeconfig=kubeconfig)
    assert str(no_name.value) == (
        "cluster mode needs the node's name — set NODE_NAME (from spec.nodeName through the downward API) "
        "or pass node_name"
    )
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    with pytest.raises(DRABackendError, match="cluster mode needs the node's name"):
        make_backend(kubelet_dir=tmp_path, driver_name=DRIVER)

    monkeypatch.setenv("NODE_NAME", "node-9")
    unknown = make_backend(kubelet_dir=tmp_path, driver_name=DRIVER, kubeconfig=kubeconfig)
    assert isinstance(unknown, ClusterBackend) and unknown.node_name == "node-9"
    with pytest.raises(DRABackendError) as not_found:
        await unknown.start()
    assert str(not_found.value).startswith('node "node-9" not found on the API server — set NODE_NAME')

    api.add_node("node-9")
    unauthorized = make_backend(
        kubelet_dir=tmp_path, driver_name=DRIVER, kubeconfig=str(api.kubeconfig(tmp_path, token="wrong"))
    )
    with pytest.raises(DRABackendError) as denied:
        await unauthorized.start()
    assert str(denied.value) == (
        "cluster mode: reading node node-9: Unauthorized — give the plugin's service account the RBAC in "
        "deploy/dra-daemonset.yaml"
    )

    missing = make_backend(kubelet_dir=tmp_path, driver_name=DRIVER, kubeconfig=str(tmp_path / "nope"))
    with pytest.raises(DRABackendError) as bad_config:
        await missing.start()
    assert str(bad_config.value) == (
        f"cluster mode: kubeconfig {tmp_path / 'nope'}: Configuration file {tmp_path / 'nope'} not found"
    )


async def test_kubeconfig_env_alone_stays_standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubedevice.plugin.dra.backend.standalone import StandaloneBackend

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    assert isinstance(make_backend(kubelet_dir=tmp_path, driver_name=DRIVER), StandaloneBackend)


async def test_a_node_unreadable_at_start_is_read_when_publishing(
    api: ApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kubedevice.plugin.dra.backend.cluster")
    node_uid = api.add_node(NODE)
    api.faults.append(("GET", 500))  # the Node read at start
    b = ClusterBackend(
        driver_name=DRIVER, node_name=NODE, kubeconfig=str(api.kubeconfig(tmp_path)), backoff=FAST
    )
    await b.start()
    try:
        assert [r.getMessage() for r in caplog.records] == [
            f"cannot read node {NODE} yet: injected fault; trying again when publishing"
        ]
        await b.publish(gpus(1))
        await settled(api, b, 1, [1])
        assert api.slice_json()[0]["metadata"]["ownerReferences"][0]["uid"] == node_uid
    finally:
        await b.stop()


async def test_an_expired_watch_lists_again_and_keeps_watching(
    api: ApiServer, backend: ClusterBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kubedevice.plugin.dra.backend.cluster")
    await backend.publish(gpus(2))
    await settled(api, backend, 1, [2])
    watches = sum(1 for r in api.log if r.query.get("watch") == "true")
    await api.expire_watches()
    await poll_async(
        lambda: sum(1 for r in api.log if r.query.get("watch") == "true") > watches, "the watch started again"
    )
    assert [r.getMessage() for r in caplog.records] == [
        f"watching the ResourceSlices of {DRIVER} failed: too old resource version: 1 (2); "
        "trying again in 0.02 s"
    ]
    # The new watch works: a deleted slice is put back.
    await api.delete_slice(api.slice_json()[0]["metadata"]["name"])
    await settled(api, backend, 2, [2])


async def test_counter_sets_taints_and_their_times_as_the_api_server_takes_them(
    api: ApiServer, backend: ClusterBackend
) -> None:
    """The stand-in validates each slice as the API server does (slice_rules): counter sets in a slice of
    their own, 64 devices a slice with taints or counters; the taints' times are read back at a restart."""
    added = datetime(2026, 7, 24, 10, 0, 0, tzinfo=UTC)
    sets = [CounterSet(f"gpu-{g}-counters", {"memory": "80Gi"}) for g in range(9)]
    devices = [
        PublishedDevice(
            f"gpu-{g}-part-{p}",
            {},
            {},
            consumes_counters=(DeviceCounterConsumption(f"gpu-{g}-counters", {"memory": "10Gi"}),),
            taints=(DeviceTaint("example.com/maintenance", "NoSchedule", time_added=added),)
            if p == 0
            else (),
        )
        for g in range(9)
        for p in range(8)
    ]
    await backend.publish(devices, sets)
    await settled(api, backend, 1, [64, 8, 0, 0])
    kinds = sorted("sharedCounters" if "sharedCounters" in s["spec"] else "devices" for s in api.slice_json())
    assert kinds == ["devices", "devices", "sharedCounters", "sharedCounters"]
    times = await backend.published_taint_times()
    assert times == {
        (f"gpu-{g}-part-0", "example.com/maintenance", "", "NoSchedule"): added for g in range(9)
    }
    # Nothing changed: the next pass writes nothing (quantities and times compared as values).
    writes = len(api.writes())
    await backend.publish(devices, sets)
    await quiet_pass(backend)
    assert len(api.writes()) == writes


async def test_a_device_status_goes_through_the_status_subresource(
    api: ApiServer, backend: ClusterBackend
) -> None:
    claim = gpu_claim()
    assert claim.status is not None
    claim.status.devices = [AllocatedDeviceStatus(driver="other.example.com", pool="p", device="d")]
    api.add_claim(claim)
    [listed] = await backend.list_claims()
    assert listed["metadata"]["name"] == "c1"

    def entries(read: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "driver": DRIVER,
                "pool": NODE,
                "device": "gpu-0",
                "data": {"seen": len(read["status"]["devices"])},
            }
        ]

    api.faults.append(("PUT", 409))  # someone else wrote the claim meanwhile: read again, write again
    await backend.update_claim_status("ml", "c1", entries)
    stored = api.claims[("ml", "c1")].to_dict()["status"]["devices"]
    assert stored == [
        {"driver": "other.example.com", "pool": "p", "device": "d"},
        {"driver": DRIVER, "pool": NODE, "device": "gpu-0", "data": {"seen": 1}},
    ]
    assert api.status_writes == 1
    with pytest.raises(ClaimFetchError, match='"nope" not found'):
        await backend.update_claim_status("ml", "nope", entries)
