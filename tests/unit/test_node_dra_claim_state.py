"""The daemon's claim state: `dra_claims.json` on disk, the start-up reconciliation, devices in use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kubedevice.checkpoint.dra_model import ClaimInfoState, DRADevice
from kubedevice.checkpoint.errors import CheckpointError
from kubedevice.controlplane.claim_store import (
    CLAIM_STATE_NAME,
    ClaimRecord,
    ClaimStore,
    ClaimStoreError,
    ClaimStoreFile,
    devices_in_use,
    reconcile_at_start,
)
from kubedevice.dra.types import DeviceRequestAllocationResult
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ConsumerReference,
    DeviceAllocationConfiguration,
    DRADocuments,
    ObjectMeta,
    OpaqueConfig,
    ResourceClaimSpec,
)

GPU = "gpu.example.com"


def alloc(*devices: str, admin: bool = False) -> AllocationResult:
    return AllocationResult(
        results=tuple(
            DeviceRequestAllocationResult("gpu", GPU, "node-1", d, admin_access=True if admin else None)
            for d in devices
        ),
        node_name="node-1",
    )


def doc(
    name: str, uid: str, allocation: AllocationResult | None = None, reserved: bool = False
) -> ClaimDocument:
    return ClaimDocument(
        meta=ObjectMeta(name=name, namespace="default", uid=uid),
        spec=ResourceClaimSpec(),
        allocation=allocation,
        reserved_for=(ConsumerReference("pods", "q", "Q"),) if reserved else None,
    )


def pod(uid: str) -> ConsumerReference:
    return ConsumerReference("pods", f"pod-{uid}", uid)


def entry(name: str, uid: str, *pods: str, devices: tuple[str, ...] = ()) -> ClaimInfoState:
    state = {GPU: tuple(DRADevice("node-1", d) for d in devices)}
    return ClaimInfoState(uid, name, "default", frozenset(pods), state)


def documents(*docs: ClaimDocument) -> DRADocuments:
    return DRADocuments(claims={d.meta.key: d for d in docs})


def full_state() -> ClaimStore:
    return ClaimStore(
        {
            "default/c1": ClaimRecord(
                uid="u1",
                allocation=AllocationResult(
                    results=alloc("gpu-0").results,
                    config=(
                        DeviceAllocationConfiguration("FromClass", (), OpaqueConfig(GPU, {"a": [1, "x"]})),
                    ),
                    node_name="node-1",
                ),
                reserved_for=(pod("A"), ConsumerReference("pods", "b", "B", api_group="")),
            ),
            "default/p-gpu-bcdfg": ClaimRecord(uid="u2", generated_for="P"),
            "default/p-extended-resources-xyz2b": ClaimRecord(
                uid="u3", extended_for="P", extended_resources={"example.com/gpu": "gpu"}
            ),
        }
    )


def test_the_file_round_trips_and_has_the_documented_shape(tmp_path: Path) -> None:
    state = full_state()
    file = ClaimStoreFile(tmp_path)
    assert file.save(state)
    raw = json.loads((tmp_path / CLAIM_STATE_NAME).read_text())
    assert raw["version"] == 1
    assert raw["claims"]["default/c1"] == {
        "uid": "u1",
        "generatedFor": None,
        "extendedFor": None,
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": GPU, "pool": "node-1", "device": "gpu-0"}],
                "config": [{"source": "FromClass", "opaque": {"driver": GPU, "parameters": {"a": [1, "x"]}}}],
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                ]
            },
        },
        "reservedFor": [
            {"resource": "pods", "name": "pod-A", "uid": "A"},
            {"resource": "pods", "name": "b", "uid": "B"},
        ],
    }
    assert raw["claims"]["default/p-extended-resources-xyz2b"]["extendedResources"] == {
        "example.com/gpu": "gpu"
    }
    loaded = ClaimStoreFile(tmp_path).load()
    assert loaded.records == state.records


def test_a_missing_file_is_an_empty_state(tmp_path: Path) -> None:
    assert ClaimStoreFile(tmp_path).load().records == {}
    assert not (tmp_path / CLAIM_STATE_NAME).exists()


def test_written_only_when_changed_and_atomically(tmp_path: Path) -> None:
    file = ClaimStoreFile(tmp_path)
    state = full_state()
    assert file.save(state)
    inode = os.stat(tmp_path / CLAIM_STATE_NAME).st_ino
    assert not file.save(state)  # same content: no write
    reread = ClaimStoreFile(tmp_path)
    same = reread.load()
    assert not reread.save(same)  # a file just read is not written back
    assert os.stat(tmp_path / CLAIM_STATE_NAME).st_ino == inode
    assert state.apply({"default/c1": None})
    assert file.save(state)
    # Replaced by rename (a new inode), no temporary file left behind.
    assert os.stat(tmp_path / CLAIM_STATE_NAME).st_ino != inode
    assert sorted(p.name for p in tmp_path.iterdir()) == [CLAIM_STATE_NAME]
    assert "default/c1" not in ClaimStoreFile(tmp_path).load().records


def test_apply_reports_changes_but_not_in_memory_documents() -> None:
    state = full_state()
    record = state.get("default/p-gpu-bcdfg")
    assert record is not None
    with_doc = ClaimRecord(uid="u2", generated_for="P", document=doc("p-gpu-bcdfg", "u2"))
    assert not state.apply({"default/p-gpu-bcdfg": with_doc})
    assert state.get("default/p-gpu-bcdfg") is with_doc
    assert not state.apply({"default/absent": None})
    assert state.apply({"default/new": ClaimRecord(uid="n")})


BAD = [
    (b"{not json", "not JSON: "),
    (b'{"version": 2, "claims": {}}', 'not a version 1 claim state ({"version":1,"claims":{…}})'),
    (b'{"version": 1, "claims": []}', "claims: must be a mapping"),
    (
        b'{"version": 1, "claims": {"default/c1": {"generatedFor": null}}}',
        "claims['default/c1']: must be a mapping with a uid",
    ),
    (
        b'{"version": 1, "claims": {"default/c1": {"uid": "u", "generatedFor": 7}}}',
        "generatedFor: must be a pod UID or null",
    ),
    (
        b'{"version": 1, "claims": {"default/c1": {"uid": "u", '
        b'"allocation": {"devices": {"results": [{}]}}}}}',
        "claims['default/c1']: allocation.devices.results[0].request: is required",
    ),
    (
        b'{"version": 1, "claims": {"default/c1": {"uid": "u", "reservedFor": [{"resource": "pods"}]}}}',
        "reservedFor[0].name: is required",
    ),
    (
        b'{"version": 1, "claims": {"default/c1": {"uid": "u", "extendedResources": {"a": 1}}}}',
        "extendedResources: must map resource names to class names",
    ),
]


@pytest.mark.parametrize(("blob", "text"), BAD)
def test_a_bad_file_is_one_error_naming_the_file_and_the_fix(tmp_path: Path, blob: bytes, text: str) -> None:
    path = tmp_path / CLAIM_STATE_NAME
    path.write_bytes(blob)
    with pytest.raises(ClaimStoreError) as caught:
        ClaimStoreFile(tmp_path).load()
    message = str(caught.value)
    assert message.startswith(str(path))
    assert text in message
    assert message.endswith(f"— move {path} aside to start without the daemon's allocations and reservations")
    assert "\n" not in message
    assert path.read_bytes() == blob


def test_a_directory_in_place_of_the_file(tmp_path: Path) -> None:
    (tmp_path / CLAIM_STATE_NAME).mkdir()
    with pytest.raises(ClaimStoreError, match=r"not a regular file \(a directory\) — move "):
        ClaimStoreFile(tmp_path).load()


# --- devices in use ---


def test_devices_in_use() -> None:
    state = ClaimStore(
        {
            # The daemon's allocations hold their devices whether or not the document is there.
            "default/gone": ClaimRecord(uid="g", allocation=alloc("gpu-0"), reserved_for=(pod("A"),)),
            "default/admin": ClaimRecord(
                uid="m", allocation=alloc("gpu-5", admin=True), reserved_for=(pod("A"),)
            ),
        }
    )
    docs = documents(
        doc("user", "u", alloc("gpu-1")),  # a user-written allocation while its document exists
        doc("user-admin", "ua", alloc("gpu-6", admin=True)),
    )
    cache = [
        entry("removed", "r", "A", devices=("gpu-2",)),  # document removed, still referenced by the cache
        entry("user", "u", "A", devices=("gpu-1",)),
        entry("admin", "m", "A", devices=("gpu-5",)),  # adminAccess known from the record: not counted
    ]
    assert devices_in_use(state, docs, cache) == {(GPU, "node-1", d) for d in ("gpu-0", "gpu-1", "gpu-2")}
    assert devices_in_use(state, documents(), []) == {(GPU, "node-1", "gpu-0")}


# --- the start-up reconciliation ---


def test_reconcile_drops_what_nothing_holds_and_keeps_the_rest() -> None:
    state = ClaimStore(
        {
            # document gone, no cache entry, its pod not listed: dropped (deallocated)
            "default/orphan": ClaimRecord(uid="o", allocation=alloc("gpu-0"), reserved_for=(pod("X"),)),
            # document gone, but the kubelet's cache still references it: kept, devices held
            "default/held": ClaimRecord(uid="h", allocation=alloc("gpu-1"), reserved_for=(pod("X"),)),
            # document gone, a listed pod reserves it: kept; the unlisted pod's reservation goes
            "default/listed": ClaimRecord(
                uid="l", allocation=alloc("gpu-2"), reserved_for=(pod("A"), pod("Y"))
            ),
            # document there (same UID), reserved by a pod gone and not cached: deallocated, dropped
            "default/idle": ClaimRecord(uid="i", allocation=alloc("gpu-3"), reserved_for=(pod("Z"),)),
            # document replaced (new UID) and nothing holds the old object: dropped
            "default/replaced": ClaimRecord(uid="old", allocation=alloc("gpu-4"), reserved_for=(pod("Z"),)),
            # generated for a listed pod: kept (even without allocation)
            "default/p-gpu-bcdfg": ClaimRecord(uid="g", generated_for="A"),
            # generated for a pod gone: dropped
            "default/q-gpu-bcdfg": ClaimRecord(uid="g2", generated_for="Q"),
            # allocated under a user-written reservedFor: kept while the document is there
            "default/user-reserved": ClaimRecord(uid="ur", allocation=alloc("gpu-7")),
        }
    )
    docs = documents(doc("idle", "i"), doc("replaced", "new"), doc("user-reserved", "ur", reserved=True))
    cache = [entry("held", "h", "X", devices=("gpu-1",))]
    updates = reconcile_at_start(state, docs, {"A"}, cache)
    assert updates == {
        "default/orphan": None,
        "default/listed": ClaimRecord(uid="l", allocation=alloc("gpu-2"), reserved_for=(pod("A"),)),
        "default/idle": None,
        "default/replaced": None,
        "default/q-gpu-bcdfg": None,
    }
    assert state.apply(updates)
    assert sorted(state.records) == [
        "default/held",
        "default/listed",
        "default/p-gpu-bcdfg",
        "default/user-reserved",
    ]
    assert reconcile_at_start(state, docs, {"A"}, cache) == {}


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    ClaimStoreFile(tmp_path).save(full_state())
    before = (tmp_path / CLAIM_STATE_NAME).read_bytes()

    def fail(stage: str) -> None:
        if stage == "after-fsync":
            raise OSError("disk gone")

    file = ClaimStoreFile(tmp_path, fault=fail)
    with pytest.raises(CheckpointError, match="disk gone"):
        file.save(ClaimStore())
    assert (tmp_path / CLAIM_STATE_NAME).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [CLAIM_STATE_NAME]
    assert ClaimStoreFile(tmp_path).save(ClaimStore())  # the next write goes through


def test_a_root_directory_that_is_a_file_fails_the_write(tmp_path: Path) -> None:
    (tmp_path / "root").write_text("")
    with pytest.raises(CheckpointError, match=r'failed to write checkpoint file "dra_claims.json"'):
        ClaimStoreFile(tmp_path / "root").save(full_state())
