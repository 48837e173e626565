"""A claim's `status.devices` written by its drivers, as the API server takes an update of the claim's
status subresource: who may write which entries, what is kept, what is refused and in which words.

In a cluster a DRA driver updates `status.devices` with its own permission (resource `resourceclaims/driver`,
the driver's name as the resource name): the API server lets it add, change or remove only the entries of
its own driver (pkg/registry/resource: AuthorizedForDeviceStatus checks each driver whose entries changed),
then validates the whole list (validateDeviceStatus). Here the request names the driver that writes
(`?driver=` on `PUT /claims/<ns>/<name>/status`), which must be one of the claim's allocated drivers, and
its body holds the writer's entries:

- the writer's entries in the body replace all of its entries (one it leaves out is removed);
- the entries of other drivers are kept as they are, whether the body repeats them unchanged (a client that
  read the claim and sends its whole list back) or leaves them out: one driver's update never erases
  another's. A body entry of another driver that differs from the stored one is refused (Forbidden), as the
  API server refuses a driver without the other driver's permission;
- every body entry is validated as the API server validates it (`device_status_rules`).

Pure: `device_status_update` decides; the control plane applies the record and waits for its durable write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore
from kubedevice.resource.device_status import (
    AllocatedDeviceStatus,
    StatusDecodeError,
    read_device_statuses,
)
from kubedevice.resource.device_status_rules import allocated_keys, validate_device_statuses
from kubedevice.resource.field_errors import FieldError, invalid_object_message, path
from kubedevice.resource.model import ClaimDocument, DRADocuments
from kubedevice.wording import go_quote

__all__ = ["StatusRefusal", "device_status_pruned", "device_status_update"]

#: What the API server calls the object in its texts.
_QUALIFIED_KIND = "ResourceClaim.resource.k8s.io"
_BODY_FIELDS = ("devices",)

Reason = Literal["BadRequest", "NotFound", "Conflict", "Forbidden", "Invalid", "InternalError"]
_CODES: Mapping[Reason, int] = {
    "BadRequest": 400,
    "Forbidden": 403,
    "NotFound": 404,
    "Conflict": 409,
    "Invalid": 422,
    "InternalError": 500,
}


@dataclass(frozen=True, slots=True)
class StatusRefusal:
    """Why an update is not taken: the API's Status reason (its HTTP code follows), one line, and the
    field errors of an Invalid one."""

    reason: Reason
    message: str
    causes: tuple[FieldError, ...] = ()

    @property
    def code(self) -> int:
        return _CODES[self.reason]


def device_status_update(
    key: str, claim: ClaimDocument | None, record: ClaimRecord | None, driver: str, body: Any
) -> ClaimRecord | StatusRefusal:
    """The claim's record with `driver`'s entries from `body` (`{"devices": [...]}`), or why not.

    `claim` is the claim as the API server shows it (None: there is none), `record` its record in the
    claim store (None: the daemon decided nothing for it yet)."""
    if claim is None:
        return StatusRefusal(
            "NotFound", f"resourceclaims.resource.k8s.io {go_quote(key.partition('/')[2])} not found"
        )
    if not driver:
        return StatusRefusal(
            "BadRequest",
            "no writing driver: name the driver that writes (a driver writes the entries of its own devices)",
        )
    try:
        entries = _read_body(body)
    except StatusDecodeError as err:
        return StatusRefusal("BadRequest", f'the body is not {{"devices": [...]}}: {err}')
    if claim.allocation is None:
        return StatusRefusal(
            "Conflict",
            f"ResourceClaim {key} is not allocated: status.devices names allocated devices only, "
            "write it once the claim is allocated",
        )
    if record is not None and record.uid != claim.meta.uid:
        return StatusRefusal(
            "Conflict",
            f"ResourceClaim {key}: the daemon still holds the claim's previous object (UID {record.uid}) "
            "until its pods are gone — try again then",
        )
    drivers = claim.allocation.drivers
    if driver not in drivers:
        return StatusRefusal(
            "Forbidden",
            f"driver {go_quote(driver)} has no device in ResourceClaim {key} (allocated from "
            f"{', '.join(drivers)}): a driver writes the status of its own devices only",
        )
    stored = {e.key: e for e in claim.device_status}
    errors = [
        FieldError.forbidden(
            path("status.devices", i),
            f"changing an entry of driver {go_quote(e.driver)} requires writing as that driver; this update "
            f"writes as {go_quote(driver)}",
        )
        for i, e in enumerate(entries)
        if e.driver != driver and stored.get(e.key) != e
    ]
    errors += validate_device_statuses(entries, claim.allocation)
    if errors:
        return StatusRefusal(
            "Invalid", invalid_object_message(_QUALIFIED_KIND, claim.meta.name, errors), tuple(errors)
        )
    devices = tuple(e for e in claim.device_status if e.driver != driver) + tuple(
        e for e in entries if e.driver == driver
    )
    return replace(record or ClaimRecord(uid=claim.meta.uid), devices=devices)


def _read_body(body: Any) -> tuple[AllocatedDeviceStatus, ...]:
    if not isinstance(body, Mapping):
        raise StatusDecodeError(["the body must be a JSON object"])
    unknown = [f"unknown field {go_quote(name)}" for name in body if name not in _BODY_FIELDS]
    try:
        entries = read_device_statuses(body.get("devices"))
    except StatusDecodeError as err:
        raise StatusDecodeError([*unknown, *err.problems]) from None
    if unknown:
        raise StatusDecodeError(unknown)
    return entries


def device_status_pruned(state: ClaimStore, documents: DRADocuments) -> dict[str, ClaimRecord | None]:
    """The updates that drop device statuses whose device left a manifest's own allocation (the user
    removed or changed it); a record whose allocation is the daemon's follows it in `ClaimStore.apply`."""
    updates: dict[str, ClaimRecord | None] = {}
    for key, record in state.records.items():
        if not record.devices or record.allocation is not None or record.generated:
            continue
        doc = documents.claims.get(key)
        if doc is None or doc.meta.uid != record.uid:
            continue  # the claim object is gone: its record goes with the reconciliation
        keys = allocated_keys(doc.allocation)
        kept = tuple(d for d in record.devices if d.key in keys)
        if kept != record.devices:
            new = replace(record, devices=kept)
            updates[key] = None if new.empty else new
    return updates
