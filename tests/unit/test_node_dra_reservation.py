"""Reservation and the claim's life: the daemon's reservedFor, the 256 limit, release and deallocation."""

from __future__ import annotations

import pytest

from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore, devices_in_use
from kubedevice.controlplane.reservation import (
    MAX_CONSUMERS,
    ReservationError,
    check_room,
    pod_removed,
    release_pod,
    reserve,
)
from kubedevice.dra.types import DeviceRequestAllocationResult
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ConsumerReference,
    DRADocuments,
    ObjectMeta,
)
from kubedevice.resource.model import ResourceClaimSpec as Spec

GPU0 = AllocationResult((DeviceRequestAllocationResult("gpu", "gpu.example.com", "node-1", "gpu-0"),))


def doc(reserved: tuple[ConsumerReference, ...] | None = None, uid: str = "u1") -> ClaimDocument:
    return ClaimDocument(ObjectMeta(name="c1", namespace="default", uid=uid), Spec(), reserved_for=reserved)


def ref(uid: str) -> ConsumerReference:
    return ConsumerReference("pods", f"p-{uid}", uid)


def test_the_daemon_reserves_each_pod_once_in_order() -> None:
    first = reserve("default/c1", doc(), None, "u1", "p-A", "A")
    assert first == ClaimRecord(uid="u1", reserved_for=(ref("A"),))
    second = reserve("default/c1", doc(), first, "u1", "p-B", "B")
    assert second is not None and second.reserved_for == (ref("A"), ref("B"))
    assert reserve("default/c1", doc(), second, "u1", "p-A", "A") is None


def test_a_written_reserved_for_is_authoritative() -> None:
    written = doc(reserved=(ref("Q"),))
    assert reserve("default/c1", written, None, "u1", "p-A", "A") is None
    full = ClaimRecord(uid="u1", reserved_for=tuple(ref(str(i)) for i in range(MAX_CONSUMERS)))
    check_room("default/c1", written, full, "A")  # the user's list is not the daemon's to limit


def test_at_most_256_consumers() -> None:
    record = ClaimRecord(uid="u1", reserved_for=tuple(ref(str(i)) for i in range(MAX_CONSUMERS - 1)))
    record = reserve("default/c1", doc(), record, "u1", "p-last", "last")
    assert record is not None and len(record.reserved_for) == MAX_CONSUMERS
    check_room("default/c1", doc(), record, "7")  # an existing consumer always fits
    with pytest.raises(ReservationError) as caught:
        reserve("default/c1", doc(), record, "u1", "p-X", "X")
    assert caught.value.message == "ResourceClaim default/c1 is reserved for the maximum of 256 consumers"
    assert str(caught.value) == caught.value.message


def test_the_last_pod_out_deallocates_a_daemon_allocation() -> None:
    state = ClaimStore(
        {"default/c1": ClaimRecord(uid="u1", allocation=GPU0, reserved_for=(ref("A"), ref("B")))}
    )
    assert state.apply(release_pod(state, "A"))
    assert state.get("default/c1") == ClaimRecord(uid="u1", allocation=GPU0, reserved_for=(ref("B"),))
    assert release_pod(state, "A") == {}  # idempotent
    assert state.apply(release_pod(state, "B"))
    assert state.get("default/c1") is None


def test_a_removed_document_keeps_its_devices_until_deallocated() -> None:
    state = ClaimStore({"default/c1": ClaimRecord(uid="u1", allocation=GPU0, reserved_for=(ref("A"),))})
    no_documents = DRADocuments()
    assert devices_in_use(state, no_documents, []) == {("gpu.example.com", "node-1", "gpu-0")}
    state.apply(release_pod(state, "A"))
    assert devices_in_use(state, no_documents, []) == frozenset()


def test_a_generated_claim_stays_until_its_pod_is_removed() -> None:
    state = ClaimStore(
        {
            "default/p-gpu-bcdfg": ClaimRecord(
                uid="g", generated_for="A", allocation=GPU0, reserved_for=(ref("A"),)
            ),
            "default/p-extended-resources-bcdfg": ClaimRecord(uid="e", extended_for="A"),
            "default/other": ClaimRecord(uid="o", generated_for="B"),
        }
    )
    state.apply(release_pod(state, "A"))
    assert state.get("default/p-gpu-bcdfg") == ClaimRecord(uid="g", generated_for="A")
    assert state.apply(pod_removed(state, "A"))
    assert list(state.records) == ["default/other"]
