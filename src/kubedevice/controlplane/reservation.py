"""Reservation and the claim's life: what the scheduler and the claim controller do around a pod.

A claim document with `status.reservedFor` is authoritative: the daemon never changes it (a test uses it
to reproduce the kubelet's `not allowed to use` text). Otherwise the daemon reserves the claim for each
pod it is about to prepare, `{resource: pods, name, uid}`, at most 256 pods (the API's limit). When the
last reserving pod has been unprepared, the reservation goes and a claim the daemon allocated is
deallocated (its devices become free); a user-written allocation stays. A removed claim document keeps
its record, and so its devices in use, until then.
"""

from __future__ import annotations

from dataclasses import replace

from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore
from kubedevice.resource.model import ClaimDocument, ConsumerReference

__all__ = ["MAX_CONSUMERS", "ReservationError", "check_room", "pod_removed", "release_pod", "reserve"]

#: The API's limit on `status.reservedFor`.
MAX_CONSUMERS = 256


class ReservationError(Exception):
    """No room for one more consumer; the pod waits (reason Unschedulable) with this text."""

    def __init__(self, claim_key: str) -> None:
        self.message = f"ResourceClaim {claim_key} is reserved for the maximum of {MAX_CONSUMERS} consumers"
        super().__init__(self.message)


def _authoritative(document: ClaimDocument | None, record: ClaimRecord | None) -> bool:
    """The user's `reservedFor` rules when the document has one and is the record's object."""
    return (
        document is not None
        and document.reserved_for is not None
        and (record is None or record.uid == document.meta.uid)
    )


def check_room(key: str, document: ClaimDocument | None, record: ClaimRecord | None, pod_uid: str) -> None:
    """Raises ReservationError when the claim cannot be reserved for one more pod."""
    if _authoritative(document, record) or record is None or record.reserves(pod_uid):
        return
    if len(record.reserved_for) >= MAX_CONSUMERS:
        raise ReservationError(key)


def reserve(
    key: str,
    document: ClaimDocument | None,
    record: ClaimRecord | None,
    uid: str,
    pod_name: str,
    pod_uid: str,
) -> ClaimRecord | None:
    """The claim's record with the pod reserved, or None when nothing changes (already reserved, or the
    document's own reservedFor rules). `uid` is the claim's UID, for a record made now.

    Raises ReservationError at the limit."""
    if _authoritative(document, record):
        return None
    check_room(key, document, record, pod_uid)
    base = record if record is not None else ClaimRecord(uid=uid)
    if base.reserves(pod_uid):
        return None
    return replace(base, reserved_for=(*base.reserved_for, ConsumerReference("pods", pod_name, pod_uid)))


def release_pod(state: ClaimStore, pod_uid: str) -> dict[str, ClaimRecord | None]:
    """The pod has been unprepared (or never got prepared and is gone): its reservations go. A claim the
    daemon allocated is deallocated with its last reservation (its device statuses with it), and a record
    left holding nothing is dropped (a generated claim's record stays until its pod is gone, see
    `pod_removed`; a user-allocated claim's device statuses stay with its allocation)."""
    updates: dict[str, ClaimRecord | None] = {}
    for key, record in state.records.items():
        if not record.reserves(pod_uid):
            continue
        left = tuple(r for r in record.reserved_for if r.uid != pod_uid)
        allocation = record.allocation if left else None
        new = replace(record, reserved_for=left, allocation=allocation)
        updates[key] = None if new.empty else new
    return updates


def pod_removed(state: ClaimStore, pod_uid: str) -> dict[str, ClaimRecord | None]:
    """The pod is unprepared and gone: its reservations go (as `release_pod`) and the claims generated
    for it (from templates, or its special claim) are deleted."""
    updates = release_pod(state, pod_uid)
    for key, record in state.records.items():
        if record.owner == pod_uid:
            updates[key] = None
    return updates
