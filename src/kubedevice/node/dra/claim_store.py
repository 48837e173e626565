"""The claims of the manifest folder as the DRA manager reads them: the daemon's stand-in for the API server.

A claim is its manifest document (spec, a user-written `status.allocation`, a user-written
`status.reservedFor`) plus what the daemon decides as scheduler: when the document has no `reservedFor`,
the daemon reserves the claim for each pod it is about to prepare (at most 256, the API's limit) and
drops a pod's reservation once the pod is gone. Reservations belong to one claim object (name and UID):
a claim replaced under the same name starts with none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubedevice.dra import types as dra
from kubedevice.dra.claim_names import resolve
from kubedevice.dra.errors import DRAError
from kubedevice.node.dra.model import ClaimDocument, ConsumerReference, ResourceClaimSpec

#: The API's limit on `status.reservedFor`.
MAX_CONSUMERS = 256
API_VERSION = "resource.k8s.io/v1"


class ReservationError(Exception):
    """The claim has no room for the pod: `ResourceClaim <ns>/<name> is reserved for the maximum of 256
    consumers`."""


class ClaimStore:
    """The claim documents of the last manifest scan, with the daemon's reservations (a ClaimSource)."""

    def __init__(self) -> None:
        self._documents: Mapping[str, ClaimDocument] = {}
        #: (namespace/name, claim UID) -> pod UID -> the reservation, in reservation order.
        self._reserved: dict[tuple[str, str], dict[str, ConsumerReference]] = {}

    def update(self, documents: Mapping[str, ClaimDocument]) -> bool:
        """Take a scan's claim documents (keyed `ns/name`); True when any claim changed."""
        changed = dict(documents) != dict(self._documents)
        self._documents = dict(documents)
        return changed

    def documents(self) -> list[ClaimDocument]:
        return [self._documents[k] for k in sorted(self._documents)]

    def documents_by_key(self) -> Mapping[str, ClaimDocument]:
        return dict(self._documents)

    def document(self, namespace: str, name: str) -> ClaimDocument | None:
        return self._documents.get(f"{namespace}/{name}")

    def reserved_for(self, doc: ClaimDocument) -> tuple[ConsumerReference, ...]:
        """`status.reservedFor` as the claim shows it: the user's list, else the daemon's reservations."""
        if doc.reserved_for is not None:
            return doc.reserved_for
        return tuple(self._reserved.get((doc.meta.key, doc.meta.uid), {}).values())

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        doc = self.document(namespace, name)
        if doc is None:
            raise dra.ClaimNotFoundError(namespace, name)
        return dra.ResourceClaim(
            namespace=namespace,
            name=name,
            uid=doc.meta.uid,
            allocation=doc.allocation.to_dra() if doc.allocation is not None else None,
            reserved_for=self.reserved_for(doc),
            owner_references=doc.meta.owner_references,
        )

    def reserve(self, pod: dra.Pod) -> None:
        """Reserve, for `pod`, each claim it names whose document leaves `reservedFor` to the daemon (the
        scheduler's step before the kubelet prepares; a claim not allocated then fails as the kubelet says).

        Raises ReservationError when a claim already has 256 other consumers; nothing is reserved then.
        """
        wanted: list[tuple[tuple[str, str], dict[str, ConsumerReference]]] = []
        for pod_claim in pod.resource_claims:
            try:
                resolved = resolve(pod, pod_claim)
            except DRAError:
                continue  # the DRA manager reports it with the kubelet's text
            if resolved is None:
                continue
            doc = self.document(pod.namespace, resolved.claim_name)
            if doc is None or doc.reserved_for is not None:
                continue
            key = (doc.meta.key, doc.meta.uid)
            reserved = self._reserved.get(key, {})
            if pod.uid not in reserved and len(reserved) >= MAX_CONSUMERS:
                raise ReservationError(
                    f"ResourceClaim {doc.meta.key} is reserved for the maximum of {MAX_CONSUMERS} consumers"
                )
            wanted.append((key, reserved))
        for key, reserved in wanted:
            reserved.setdefault(pod.uid, ConsumerReference("pods", pod.name, pod.uid))
            self._reserved[key] = reserved

    def seed(
        self, claim_pods: Iterable[tuple[str, str, Iterable[str]]], pod_names: Mapping[str, str]
    ) -> None:
        """Reservations after a restart: each (namespace/name, claim UID, pod UIDs) the DRA manager's cache
        restored, for claims whose document is the same object and leaves `reservedFor` to the daemon, and
        pods still there (`pod_names`: UID -> name; the others' claims are about to be unprepared)."""
        for key, claim_uid, pod_uids in claim_pods:
            doc = self._documents.get(key)
            if doc is None or doc.meta.uid != claim_uid or doc.reserved_for is not None:
                continue
            for uid in sorted(u for u in pod_uids if u in pod_names):
                reserved = self._reserved.setdefault((key, claim_uid), {})
                reserved.setdefault(uid, ConsumerReference("pods", pod_names[uid], uid))

    def release(self, pod_uid: str) -> None:
        """The pod is gone: its reservations go (the claim controller's cleanup of `reservedFor`)."""
        for key in list(self._reserved):
            reserved = self._reserved[key]
            reserved.pop(pod_uid, None)
            if not reserved:
                del self._reserved[key]

    def claim_json(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The claim in the `resource.k8s.io/v1` JSON shape an API server returns; None when absent."""
        doc = self.document(namespace, name)
        if doc is None:
            return None
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": doc.meta.uid}
        if doc.meta.labels:
            meta["labels"] = dict(doc.meta.labels)
        if doc.meta.annotations:
            meta["annotations"] = dict(doc.meta.annotations)
        if doc.meta.owner_references:
            meta["ownerReferences"] = [
                {
                    "apiVersion": r.api_version,
                    "kind": r.kind,
                    "name": r.name,
                    "uid": r.uid,
                    **({"controller": True} if r.controller else {}),
                }
                for r in doc.meta.owner_references
            ]
        status: dict[str, Any] = {}
        if doc.allocation is not None:
            status["allocation"] = doc.allocation.to_json()
        reserved = self.reserved_for(doc)
        if reserved:
            status["reservedFor"] = [consumer_json(r) for r in reserved]
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": meta,
            "spec": spec_json(doc.spec),
            "status": status,
        }


def consumer_json(ref: ConsumerReference) -> dict[str, str]:
    out = {"resource": ref.resource, "name": ref.name, "uid": ref.uid}
    if ref.api_group:
        out["apiGroup"] = ref.api_group
    return out


def spec_json(spec: ResourceClaimSpec) -> dict[str, Any]:
    """A claim's `spec` in the v1 shape (`spec.devices.requests[]` with `exactly` or `firstAvailable`)."""
    requests: list[dict[str, Any]] = []
    for r in spec.requests:
        entry: dict[str, Any] = {"name": r.name}
        if r.exactly is not None:
            e = r.exactly
            exactly = _device_selection(e.device_class_name, e.selectors, e.allocation_mode, e.count)
            if e.admin_access:
                exactly["adminAccess"] = True
            _left_out(exactly, e.tolerations, e.capacity)
            entry["exactly"] = exactly
        if r.first_available:
            subs = []
            for s in r.first_available:
                sub = {
                    "name": s.name,
                    **_device_selection(s.device_class_name, s.selectors, s.allocation_mode, s.count),
                }
                _left_out(sub, s.tolerations, s.capacity)
                subs.append(sub)
            entry["firstAvailable"] = subs
        requests.append(entry)
    devices: dict[str, Any] = {"requests": requests}
    if spec.constraints:
        devices["constraints"] = [
            {
                **({"requests": list(c.requests)} if c.requests else {}),
                **({"matchAttribute": c.match_attribute} if c.match_attribute else {}),
                **({"distinctAttribute": c.distinct_attribute} if c.distinct_attribute else {}),
            }
            for c in spec.constraints
        ]
    if spec.config:
        devices["config"] = [
            {
                **({"requests": list(c.requests)} if c.requests else {}),
                **(
                    {"opaque": {"driver": c.opaque.driver, "parameters": c.opaque.parameters}}
                    if c.opaque is not None
                    else {}
                ),
            }
            for c in spec.config
        ]
    return {"devices": devices}


def _device_selection(device_class: str, selectors: tuple[str, ...], mode: str, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": device_class}
    if selectors:
        out["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    out["allocationMode"] = mode
    if mode == "ExactCount":
        out["count"] = count
    return out


def _left_out(
    out: dict[str, Any], tolerations: tuple[Mapping[str, Any], ...], capacity: Mapping[str, Any] | None
) -> None:
    if tolerations:
        out["tolerations"] = [dict(t) for t in tolerations]
    if capacity is not None:
        out["capacity"] = dict(capacity)
