"""The daemon's claim store: claim documents read from a real manifest folder, the daemon's reservations
(at most 256, dropped with the pod, reset by a replaced claim), the user's reservedFor left alone, and the
claim in the v1 shape the SDK's standalone backend reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedevice.dra import ClaimNotFoundError, Pod, PodClaim
from kubedevice.node.dra.claim_store import MAX_CONSUMERS, ClaimStore, ReservationError
from kubedevice.node.manifest_folder import ManifestFolder
from kubedevice.plugin.dra.model import claim_from_json
from tests.node_dra_helpers import claim_yaml

CONFIGURED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: cfg, namespace: ml, uid: u-cfg, labels: {team: a}}
spec:
  devices:
    requests:
    - name: ts
      exactly: {deviceClassName: gpu, selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]}
    - name: any
      firstAvailable:
      - {name: big, deviceClassName: gpu, count: 2}
      - {name: all, deviceClassName: gpu, allocationMode: All}
    constraints:
    - {requests: [ts, any], matchAttribute: gpu.example.com/numaNode}
    config:
    - requests: [ts]
      opaque: {driver: gpu.example.com, parameters: {sharing: TimeSlicing}}
status:
  allocation:
    devices:
      results:
      - {request: ts, driver: gpu.example.com, pool: node-1, device: gpu-0}
      - {request: any/big, driver: gpu.example.com, pool: node-1, device: gpu-1, adminAccess: false}
      config:
      - source: FromClaim
        requests: [ts]
        opaque: {driver: gpu.example.com, parameters: {sharing: TimeSlicing}}
"""


def store_of(folder: Path, *documents: str) -> ClaimStore:
    (folder / "claims.yaml").write_text("---\n".join(documents))
    result = ManifestFolder(folder).scan()
    assert result.errors == {}, result.errors
    store = ClaimStore()
    store.update(result.dra.claims)
    return store


def pod(uid: str, *claims: str, namespace: str = "default") -> Pod:
    return Pod(
        uid, namespace, uid.lower(), resource_claims=tuple(PodClaim(c, resource_claim_name=c) for c in claims)
    )


async def test_the_daemon_reserves_drops_and_resets_with_a_new_claim(tmp_path: Path) -> None:
    store = store_of(tmp_path, claim_yaml("c1", uid="u1"))
    store.reserve(pod("A", "c1", "missing"))
    store.reserve(pod("B", "c1"))
    store.reserve(pod("A", "c1"))  # again: kept once
    claim = await store.get_claim("default", "c1")
    assert [(r.name, r.uid) for r in claim.reserved_for] == [("a", "A"), ("b", "B")]
    assert claim.allocation is not None and [r.device for r in claim.allocation.results] == ["gpu-0"]
    store.release("A")
    assert [r.uid for r in (await store.get_claim("default", "c1")).reserved_for] == ["B"]
    # The same name, another claim object: its reservations start empty.
    assert store.update(store_of(tmp_path, claim_yaml("c1", uid="u2")).documents_by_key())
    assert (await store.get_claim("default", "c1")).reserved_for == ()
    with pytest.raises(ClaimNotFoundError) as missing:
        await store.get_claim("default", "missing")
    assert str(missing.value) == 'resourceclaims.resource.k8s.io "missing" not found'


async def test_a_257th_pod_is_refused_and_the_users_reserved_for_is_never_changed(tmp_path: Path) -> None:
    store = store_of(tmp_path, claim_yaml("c1"), claim_yaml("mine", reserved_for=[("q", "Q")]))
    for i in range(MAX_CONSUMERS):
        store.reserve(pod(f"P{i}", "c1"))
    with pytest.raises(ReservationError) as refused:
        store.reserve(pod("late", "mine", "c1"))
    assert str(refused.value) == "ResourceClaim default/c1 is reserved for the maximum of 256 consumers"
    store.reserve(pod("P0", "c1"))  # a pod already reserved is no new consumer
    store.release("P3")
    store.reserve(pod("late", "mine", "c1"))
    assert [r.uid for r in (await store.get_claim("default", "mine")).reserved_for] == ["Q"]
    assert len((await store.get_claim("default", "c1")).reserved_for) == MAX_CONSUMERS


async def test_seeded_from_the_restored_cache_for_the_same_claim_object_only(tmp_path: Path) -> None:
    store = store_of(tmp_path, claim_yaml("c1", uid="u1"), claim_yaml("c2", uid="u2"))
    names = {"P": "p", "Q": "q"}
    store.seed([("default/c1", "u1", ["P", "gone"]), ("default/c2", "old-uid", ["Q"])], names)
    assert [(r.name, r.uid) for r in (await store.get_claim("default", "c1")).reserved_for] == [("p", "P")]
    assert (await store.get_claim("default", "c2")).reserved_for == ()


def test_the_claim_in_the_v1_shape_as_the_sdk_reads_it(tmp_path: Path) -> None:
    store = store_of(tmp_path, CONFIGURED)
    store.reserve(pod("P", "cfg", namespace="ml"))
    claim = store.claim_json("ml", "cfg")
    assert claim is not None and store.claim_json("ml", "other") is None
    assert claim["apiVersion"] == "resource.k8s.io/v1" and claim["kind"] == "ResourceClaim"
    assert claim["metadata"] == {"name": "cfg", "namespace": "ml", "uid": "u-cfg", "labels": {"team": "a"}}
    assert claim["spec"] == {
        "devices": {
            "requests": [
                {
                    "name": "ts",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                        "allocationMode": "ExactCount",
                        "count": 1,
                    },
                },
                {
                    "name": "any",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
                        {"name": "all", "deviceClassName": "gpu", "allocationMode": "All"},
                    ],
                },
            ],
            "constraints": [{"requests": ["ts", "any"], "matchAttribute": "gpu.example.com/numaNode"}],
            "config": [
                {
                    "requests": ["ts"],
                    "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "TimeSlicing"}},
                }
            ],
        }
    }
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "P"}]
    seen = claim_from_json(claim, "gpu.example.com", {"gpu-0": "fake-0", "gpu-1": "fake-1"})
    assert (seen.uid, seen.namespace, seen.name) == ("u-cfg", "ml", "cfg")
    assert [(r.request, r.device, r.device_id) for r in seen.results] == [
        ("ts", "gpu-0", "fake-0"),
        ("any/big", "gpu-1", "fake-1"),
    ]
    assert [dict(c) for c in seen.config] == [
        {
            "source": "FromClaim",
            "requests": ["ts"],
            "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "TimeSlicing"}},
        }
    ]
