"""A driver's update of a claim's `status.devices`, decided as the API server decides it, and the entries'
life in the claim store: who may write which entries, what a driver's update keeps of the others', what is
refused and with which answer; kept on disk, gone with the allocation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore, ClaimStoreError, ClaimStoreFile
from kubedevice.controlplane.device_status import StatusRefusal, device_status_pruned, device_status_update
from kubedevice.controlplane.reservation import release_pod
from kubedevice.resource.device_status import read_device_statuses
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ConsumerReference,
    DeviceRequestAllocationResult,
    DRADocuments,
    ObjectMeta,
    ResourceClaimSpec,
)

GPU = "gpu.example.com"
NIC = "nic.example.com"
UID = "c1c1c1c1-0000-4000-8000-000000000001"
KEY = "default/c1"
T = "2026-07-24T10:00:00Z"
ALLOCATION = AllocationResult(
    results=(
        DeviceRequestAllocationResult("gpu", GPU, "node-1", "gpu-0"),
        DeviceRequestAllocationResult("nic", NIC, "node-1", "nic-0"),
    )
)


def claim(
    allocation: AllocationResult | None = ALLOCATION, record: ClaimRecord | None = None
) -> ClaimDocument:
    return ClaimDocument(
        meta=ObjectMeta(name="c1", namespace="default", uid=UID),
        spec=ResourceClaimSpec(),
        allocation=allocation,
        device_status=record.devices if record is not None else (),
    )


def status(driver: str, device: str, ready: str = "True") -> dict[str, Any]:
    return {
        "driver": driver,
        "pool": "node-1",
        "device": device,
        "conditions": [{"type": "Ready", "status": ready, "reason": "Done", "lastTransitionTime": T}],
    }


def update(record: ClaimRecord | None, driver: str, *devices: dict[str, Any]) -> ClaimRecord:
    outcome = device_status_update(KEY, claim(record=record), record, driver, {"devices": list(devices)})
    assert isinstance(outcome, ClaimRecord), outcome
    return outcome


def refusal(outcome: ClaimRecord | StatusRefusal) -> tuple[int, str, str]:
    assert isinstance(outcome, StatusRefusal), outcome
    return outcome.code, outcome.reason, outcome.message


def test_one_drivers_update_never_erases_anothers_entries() -> None:
    first = update(None, GPU, status(GPU, "gpu-0"))
    both = update(first, NIC, status(NIC, "nic-0"))
    assert [(d.driver, d.device) for d in both.devices] == [(GPU, "gpu-0"), (NIC, "nic-0")]
    # The GPU driver writes again: its entry is replaced, the NIC driver's stays.
    again = update(both, GPU, status(GPU, "gpu-0", ready="False"))
    assert [(d.driver, d.conditions[0].status) for d in again.devices] == [(NIC, "True"), (GPU, "False")]
    # An update that sends the other driver's entry back unchanged (read, edit, write) is taken.
    echoed = update(again, GPU, status(NIC, "nic-0"), status(GPU, "gpu-0"))
    assert [(d.driver, d.conditions[0].status) for d in echoed.devices] == [(NIC, "True"), (GPU, "True")]
    # An empty list removes the writer's entries only.
    assert [d.driver for d in update(echoed, GPU).devices] == [NIC]


def test_changing_another_drivers_entry_is_forbidden_in_the_invalid_answer() -> None:
    record = update(None, NIC, status(NIC, "nic-0"))
    outcome = device_status_update(
        KEY,
        claim(record=record),
        record,
        GPU,
        {"devices": [status(GPU, "gpu-0"), status(NIC, "nic-0", "False")]},
    )
    forbidden = (
        f'status.devices[1]: Forbidden: changing an entry of driver "{NIC}" requires writing as that driver; '
        f'this update writes as "{GPU}"'
    )
    assert refusal(outcome) == (422, "Invalid", f'ResourceClaim.resource.k8s.io "c1" is invalid: {forbidden}')
    assert isinstance(outcome, StatusRefusal)
    assert [c.cause() for c in outcome.causes] == [
        {"reason": "FieldValueForbidden", "message": forbidden, "field": "status.devices[1]"}
    ]


@pytest.mark.parametrize(
    ("document", "driver", "body", "expected"),
    [
        (None, GPU, {"devices": []}, (404, "NotFound", 'resourceclaims.resource.k8s.io "c1" not found')),
        (
            claim(),
            "",
            {"devices": []},
            (
                400,
                "BadRequest",
                "no writing driver: name the driver that writes (a driver writes the entries of "
                "its own devices)",
            ),
        ),
        (
            claim(),
            GPU,
            {"devices": [], "status": {}},
            (400, "BadRequest", 'the body is not {"devices": [...]}: unknown field "status"'),
        ),
        (
            claim(),
            GPU,
            [status(GPU, "gpu-0")],
            (400, "BadRequest", 'the body is not {"devices": [...]}: the body must be a JSON object'),
        ),
        (
            claim(allocation=None),
            GPU,
            {"devices": [status(GPU, "gpu-0")]},
            (
                409,
                "Conflict",
                "ResourceClaim default/c1 is not allocated: status.devices names allocated devices "
                "only, write it once the claim is allocated",
            ),
        ),
        (
            claim(),
            "other.example.com",
            {"devices": []},
            (
                403,
                "Forbidden",
                'driver "other.example.com" has no device in ResourceClaim default/c1 (allocated '
                f"from {GPU}, {NIC}): a driver writes the status of its own devices only",
            ),
        ),
        (
            claim(),
            GPU,
            {"devices": [status(GPU, "gpu-9")]},
            (
                422,
                "Invalid",
                'ResourceClaim.resource.k8s.io "c1" is invalid: status.devices[0]: Invalid value: '
                f"{GPU}/node-1/gpu-9: must be an allocated device in the claim",
            ),
        ),
    ],
    ids=[
        "no claim",
        "no driver",
        "unknown field",
        "not an object",
        "not allocated",
        "not its driver",
        "invalid",
    ],
)
def test_an_update_is_refused_with_the_api_servers_answer(
    document: ClaimDocument | None, driver: str, body: Any, expected: tuple[int, str, str]
) -> None:
    assert refusal(device_status_update(KEY, document, None, driver, body)) == expected


def test_a_record_of_the_claims_previous_object_is_not_written() -> None:
    stale = ClaimRecord(uid="0ld0ld00-0000-4000-8000-000000000000", allocation=ALLOCATION)
    code, reason, message = refusal(device_status_update(KEY, claim(), stale, GPU, {"devices": []}))
    assert (code, reason) == (409, "Conflict")
    assert "previous object (UID 0ld0ld00-0000-4000-8000-000000000000)" in message


def test_the_entries_go_with_the_daemons_allocation_and_stay_with_a_users() -> None:
    pod = ConsumerReference("pods", "p", "P")
    written = update(None, GPU, status(GPU, "gpu-0"))
    store = ClaimStore({KEY: replace(written, allocation=ALLOCATION, reserved_for=(pod,))})
    # The last pod leaves: the daemon deallocates, and status.devices goes with the allocation.
    assert store.apply(release_pod(store, "P"))
    assert store.get(KEY) is None

    # A manifest's allocation: the record keeps the entries (and only them) after the pod left.
    store = ClaimStore({KEY: replace(written, reserved_for=(pod,))})
    store.apply(release_pod(store, "P"))
    assert store.get(KEY) == written
    # The user removes gpu-0 from the manifest's allocation: its entry goes, and the record with it.
    documents = DRADocuments(claims={KEY: claim(allocation=AllocationResult(results=ALLOCATION.results[1:]))})
    assert store.apply(device_status_pruned(store, documents))
    assert store.get(KEY) is None


def test_a_reallocation_keeps_the_entries_of_devices_still_allocated() -> None:
    devices = read_device_statuses([status(GPU, "gpu-0"), status(NIC, "nic-0")])
    record = ClaimRecord(uid=UID, allocation=ALLOCATION, devices=devices)
    store = ClaimStore({KEY: record})
    store.apply({KEY: replace(record, allocation=AllocationResult(results=ALLOCATION.results[1:]))})
    kept = store.get(KEY)
    assert kept is not None and [d.driver for d in kept.devices] == [NIC]


def test_the_entries_are_kept_in_dra_claims_json_and_read_back(tmp_path: Path) -> None:
    record = update(None, GPU, status(GPU, "gpu-0"))
    file = ClaimStoreFile(tmp_path)
    file.save(ClaimStore({KEY: record}))
    on_disk = json.loads((tmp_path / "dra_claims.json").read_text())["claims"][KEY]
    assert on_disk["devices"] == [
        {
            **status(GPU, "gpu-0"),
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": T, "reason": "Done", "message": ""}
            ],
        }
    ]
    assert ClaimStoreFile(tmp_path).load().get(KEY) == record
    # A record without entries is written as before (no `devices` key).
    file.save(ClaimStore({KEY: ClaimRecord(uid=UID, allocation=ALLOCATION)}))
    assert "devices" not in json.loads((tmp_path / "dra_claims.json").read_text())["claims"][KEY]


def test_a_file_whose_entries_cannot_be_read_is_refused_with_the_field(tmp_path: Path) -> None:
    (tmp_path / "dra_claims.json").write_text(
        json.dumps({"version": 1, "claims": {KEY: {"uid": UID, "devices": [{"driver": 1}]}}})
    )
    with pytest.raises(
        ClaimStoreError, match=r"claims\['default/c1'\]: devices\[0\]\.driver: cannot decode a number"
    ):
        ClaimStoreFile(tmp_path).load()
