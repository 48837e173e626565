"""The daemon's own claim state, `D/dra_claims.json`: what it decided as scheduler and claim controller.

    {"version": 1, "claims": {"<ns>/<name>": {"uid": ..., "generatedFor": <podUID|null>,
     "extendedFor": <podUID|null>, "allocation": <v1 AllocationResult|null>, "reservedFor": [...],
     "devices": [<v1 AllocatedDeviceStatus>...] (only when there are some)}}}

A record holds the allocations the daemon made, the reservations it added (a claim whose document has
`status.reservedFor` keeps the user's list and gets none) and the claims it generated (from a template:
`generatedFor`; the special claim of extended resources: `extendedFor`, which also keeps the routing decision
as `extendedResources`, name -> class, so it never flips after a restart), and the claim's `status.devices`
as its drivers wrote them through the status API. Manifests are never written; the kubelet's
`dra_manager_state` stays the only record of prepared claims.

A device's status lives as long as its allocation, as the API server drops `status.devices` entries whose
device leaves `status.allocation` (the resourceclaim strategy's dropDeallocatedStatusDevices): `apply` drops
them when a record's own allocation changes (controlplane.device_status when a manifest's allocation does).

The file is written atomically and durably (the checkpoint's mechanics), only when its content changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubedevice.checkpoint.dra_model import ClaimInfoState
from kubedevice.checkpoint.errors import CheckpointError, CheckpointNotFoundError
from kubedevice.checkpoint.store import CheckpointFile, read_file
from kubedevice.dra import types as dra
from kubedevice.resource.device_status import (
    AllocatedDeviceStatus,
    StatusDecodeError,
    device_statuses_json,
    read_device_statuses,
)
from kubedevice.resource.device_status_rules import allocated_keys
from kubedevice.resource.documents import read_allocation, read_reserved_for
from kubedevice.resource.fields import DocumentError
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ConsumerReference,
    DeviceID,
    DRADocuments,
)
from kubedevice.scheduler.allocated import AllocatedState

__all__ = [
    "CLAIM_STATE_NAME",
    "ClaimRecord",
    "ClaimStore",
    "ClaimStoreError",
    "ClaimStoreFile",
    "Updates",
    "allocated_state",
    "devices_in_use",
    "effective_claim",
    "reconcile_at_start",
    "to_resource_claim",
]

CLAIM_STATE_NAME = "dra_claims.json"
_VERSION = 1


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim's daemon-decided part. `document` is the generated claim itself, kept in memory only
    (rebuilt from the pod after a restart); it takes no part in equality, so it never causes a write."""

    uid: str
    generated_for: str | None = None
    extended_for: str | None = None
    #: An allocation the daemon made (a user-written one stays in the document).
    allocation: AllocationResult | None = None
    #: The reservations the daemon added, in order.
    reserved_for: tuple[ConsumerReference, ...] = ()
    #: For the special claim: extended resource name -> DeviceClass, the decision made at admission.
    extended_resources: Mapping[str, str] = field(default_factory=dict)
    #: The claim's `status.devices`, written by its drivers.
    devices: tuple[AllocatedDeviceStatus, ...] = ()
    document: ClaimDocument | None = field(default=None, compare=False)

    @property
    def generated(self) -> bool:
        return self.generated_for is not None or self.extended_for is not None

    @property
    def owner(self) -> str | None:
        """The pod a generated claim belongs to."""
        return self.generated_for if self.generated_for is not None else self.extended_for

    @property
    def empty(self) -> bool:
        """Holds nothing the daemon decided or keeps: the record can go."""
        return not self.generated and self.allocation is None and not self.reserved_for and not self.devices

    def reserves(self, pod_uid: str) -> bool:
        return any(r.uid == pod_uid for r in self.reserved_for)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uid": self.uid,
            "generatedFor": self.generated_for,
            "extendedFor": self.extended_for,
            "allocation": self.allocation.to_json() if self.allocation is not None else None,
            "reservedFor": [_consumer_json(r) for r in self.reserved_for],
        }
        if self.extended_resources:
            out["extendedResources"] = dict(sorted(self.extended_resources.items()))
        if self.devices:
            out["devices"] = device_statuses_json(self.devices)
        return out


#: What one decision changes: claim key -> its new record, or None to drop it.
Updates = Mapping[str, ClaimRecord | None]


class ClaimStoreError(Exception):
    """`dra_claims.json` cannot be used; str() names the file and what to do."""


class ClaimStore:
    """Every record, keyed `ns/name`. Changed only through :meth:`apply`."""

    def __init__(self, records: Mapping[str, ClaimRecord] | None = None) -> None:
        self._records: dict[str, ClaimRecord] = dict(records or {})

    @property
    def records(self) -> Mapping[str, ClaimRecord]:
        return self._records

    def get(self, key: str) -> ClaimRecord | None:
        return self._records.get(key)

    def apply(self, updates: Updates) -> bool:
        """Apply a decision's updates; True when the persisted content changed (a save is due).

        A record whose own allocation changed keeps only the device statuses of devices still allocated,
        and a record left holding nothing goes."""
        changed = False
        for key, update in updates.items():
            old = self._records.get(key)
            record = _allocation_followed(old, update)
            if record is None:
                if old is not None:
                    del self._records[key]
                    changed = True
            else:
                changed = changed or old != record
                self._records[key] = record
        return changed

    def to_json(self) -> dict[str, Any]:
        return {"version": _VERSION, "claims": {k: self._records[k].to_json() for k in sorted(self._records)}}

    def encode(self) -> bytes:
        # One line: json's C encoder serves only output without indent, and the whole state is written
        # again at each change (pure Python took ~14 ms a write at 400 claims, O(N^2) over a burst).
        return (json.dumps(self.to_json()) + "\n").encode()

    @classmethod
    def from_json(cls, value: Any, where: str) -> ClaimStore:
        """Raises ClaimStoreError naming `where` (the file) for any shape problem."""
        if not isinstance(value, Mapping) or value.get("version") != _VERSION:
            raise ClaimStoreError(
                f'{where}: not a version {_VERSION} claim state ({{"version":1,"claims":{{…}}}})'
            )
        claims = value.get("claims")
        if not isinstance(claims, Mapping):
            raise ClaimStoreError(f"{where}: claims: must be a mapping")
        records: dict[str, ClaimRecord] = {}
        for key, raw in claims.items():
            records[key] = _record(raw, f"{where}: claims[{key!r}]: ")
        return cls(records)


def _record(raw: Any, where: str) -> ClaimRecord:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("uid"), str) or not raw["uid"]:
        raise ClaimStoreError(f"{where}must be a mapping with a uid")
    pods = {}
    for name in ("generatedFor", "extendedFor"):
        pod = raw.get(name)
        if pod is not None and not isinstance(pod, str):
            raise ClaimStoreError(f"{where}{name}: must be a pod UID or null")
        pods[name] = pod
    extended = raw.get("extendedResources", {})
    if not isinstance(extended, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in extended.items()
    ):
        raise ClaimStoreError(f"{where}extendedResources: must map resource names to class names")
    try:
        allocation = read_allocation(raw.get("allocation"), where)
        reserved = read_reserved_for(raw.get("reservedFor"), where)
    except DocumentError as err:
        raise ClaimStoreError(str(err)) from None
    try:
        devices = read_device_statuses(raw.get("devices"), f"{where}devices")
    except StatusDecodeError as err:
        raise ClaimStoreError(str(err)) from None
    return ClaimRecord(
        uid=raw["uid"],
        generated_for=pods["generatedFor"],
        extended_for=pods["extendedFor"],
        allocation=allocation,
        reserved_for=reserved,
        extended_resources=dict(extended),
        devices=devices,
    )


def _allocation_followed(old: ClaimRecord | None, new: ClaimRecord | None) -> ClaimRecord | None:
    """`new` with the device statuses its own allocation no longer holds dropped (when the daemon's
    allocation changed), and None when it then holds nothing."""
    if new is None or old is None or old.allocation is None or new.allocation == old.allocation:
        return new
    if new.devices:
        keys = allocated_keys(new.allocation)
        new = replace(new, devices=tuple(d for d in new.devices if d.key in keys))
    return None if new.empty else new


def _consumer_json(ref: ConsumerReference) -> dict[str, str]:
    out = {"resource": ref.resource, "name": ref.name, "uid": ref.uid}
    if ref.api_group:
        out["apiGroup"] = ref.api_group
    return out


class ClaimStoreFile(CheckpointFile):
    """`dra_claims.json` in the root directory. Blocking: run on a thread from the event loop.
    `fault` is CheckpointFile's test hook, called at each write stage."""

    def __init__(
        self, directory: Path, name: str = CLAIM_STATE_NAME, *, fault: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(directory, name, fault=fault)
        self._written: bytes | None = None

    def load(self) -> ClaimStore:
        """The state on disk, or an empty one when there is no file. Raises ClaimStoreError."""
        fix = f"move {self.path} aside to start without the daemon's allocations and reservations"
        try:
            blob = read_file(self.path)
        except CheckpointNotFoundError:
            return ClaimStore()
        except CheckpointError as err:
            raise ClaimStoreError(f"{err} — {fix}") from None
        try:
            value = json.loads(blob)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ClaimStoreError(f"{self.path}: not JSON: {err} — {fix}") from None
        try:
            state = ClaimStore.from_json(value, str(self.path))
        except ClaimStoreError as err:
            raise ClaimStoreError(f"{err} — {fix}") from None
        self._written = blob
        return state

    def save(self, state: ClaimStore) -> bool:
        """Write the state when it differs from what the file holds; True when written.

        Raises CheckpointError (the file is left as it was). From the event loop, encode there and write
        on a thread, so the state never changes under the encoder:
        `await asyncio.to_thread(file.write, state.encode())`."""
        return self.write(state.encode())

    def write(self, blob: bytes) -> bool:
        """Write `ClaimStore.encode()`'s bytes when they differ from the file's; True when written."""
        if blob == self._written:
            return False
        self._replace(lambda: blob)
        self._written = blob
        return True


# --- the claim as the API server would show it -----------------------------------------------------------


def effective_claim(document: ClaimDocument | None, record: ClaimRecord | None) -> ClaimDocument | None:
    """The claim with the daemon's decisions filled in: a user document (its own allocation and
    reservedFor win), or a generated claim. None when neither exists now (a removed document's record
    keeps only its devices in use)."""
    if document is not None:
        if record is None or record.uid != document.meta.uid:
            return document
        return replace(
            document,
            allocation=document.allocation if document.allocation is not None else record.allocation,
            reserved_for=document.reserved_for if document.reserved_for is not None else record.reserved_for,
            device_status=record.devices,
        )
    if record is not None and record.document is not None:
        return replace(
            record.document,
            allocation=record.allocation,
            reserved_for=record.reserved_for,
            device_status=record.devices,
        )
    return None


def to_resource_claim(claim: ClaimDocument) -> dra.ResourceClaim:
    """What the DRA manager reads of a claim (its ClaimSource answer)."""
    return dra.ResourceClaim(
        namespace=claim.meta.namespace,
        name=claim.meta.name,
        uid=claim.meta.uid,
        allocation=claim.allocation,
        reserved_for=claim.reserved_for or (),
        owner_references=claim.meta.owner_references,
    )


# --- devices in use, and the start-up reconciliation ---------------------------------------------------


def devices_in_use(
    state: ClaimStore, documents: DRADocuments, cache: Iterable[ClaimInfoState]
) -> frozenset[DeviceID]:
    """The devices `allocated_state` says are taken whole."""
    return allocated_state(state, documents, cache).in_use


def allocated_state(
    state: ClaimStore, documents: DRADocuments, cache: Iterable[ClaimInfoState]
) -> AllocatedState:
    """What no new allocation may take: the devices of every claim the daemon allocated, until it
    deallocates them; those of a user-written allocation while its document exists or a cache entry
    references the claim (a removed document's devices are then read from the cache entry, which cannot
    tell adminAccess apart nor say what a share consumed, so they count as taken whole). Results with
    adminAccess never count; results with a shareID consume their share of the device's capacity."""
    allocations = [r.allocation for r in state.records.values() if r.allocation is not None]
    allocations.extend(doc.allocation for doc in documents.claims.values() if doc.allocation is not None)
    used: set[DeviceID] = set()
    for entry in cache:
        written = documents.claims.get(entry.key)
        decided = state.get(entry.key)
        if (written is not None and written.meta.uid == entry.claim_uid) or (
            decided is not None and decided.uid == entry.claim_uid and decided.allocation is not None
        ):
            continue  # counted above, with adminAccess known
        for driver, devices in (entry.driver_state or {}).items():
            used.update((driver, d.pool_name, d.device_name) for d in devices or ())
    return AllocatedState.gather(allocations, used)


def reconcile_at_start(
    state: ClaimStore,
    documents: DRADocuments,
    pod_uids: Collection[str],
    cache: Iterable[ClaimInfoState],
) -> dict[str, ClaimRecord | None]:
    """The updates that bring a restored state in line with the manifests and the kubelet's cache.

    A reservation stays while its pod is listed or a cache entry of the claim lists the pod. A record
    stays while its origin is there (the document with the same UID, or the generating pod), a cache
    entry references the claim, or a listed pod reserves it; one that goes is deallocated with it. A
    daemon allocation left with no reservation is deallocated, as the claim controller does.

    Safe after any later scan too, with `pod_uids` every pod the daemon knows (Terminating ones
    included): it then also drops what a removed document left behind.
    """
    referenced: dict[str, set[str]] = {}
    for entry in cache:
        referenced.setdefault(entry.key, set()).update(entry.pod_uids or ())
    listed = set(pod_uids)
    updates: dict[str, ClaimRecord | None] = {}
    for key, record in state.records.items():
        users = referenced.get(key, set())
        kept = tuple(r for r in record.reserved_for if r.uid in listed or r.uid in users)
        doc = documents.claims.get(key)
        if record.generated:
            origin = record.owner in listed
        else:
            origin = doc is not None and doc.meta.uid == record.uid
        if not (origin or key in referenced or kept):
            updates[key] = None
            continue
        allocation = record.allocation
        user_reserved = doc is not None and doc.meta.uid == record.uid and doc.reserved_for is not None
        if allocation is not None and not kept and not user_reserved and key not in referenced:
            allocation = None
        new = replace(record, reserved_for=kept, allocation=allocation)
        if new.empty:
            updates[key] = None
        elif new != record:
            updates[key] = new
    return updates
