"""A claim in the `resource.k8s.io/v1` JSON shape an API server returns: what `GET /claims/<ns>/<name>`
answers (the SDK's standalone backend reads it), with the drivers' `status.devices`, and what `/claims`
lists."""

from __future__ import annotations

from typing import Any

from kubedevice.resource.capacity import CapacityRequirements
from kubedevice.resource.device_status import device_statuses_json
from kubedevice.resource.model import ClaimDocument, ConsumerReference, ResourceClaimSpec
from kubedevice.resource.taints import DeviceToleration

API_VERSION = "resource.k8s.io/v1"


def claim_json(claim: ClaimDocument) -> dict[str, Any]:
    """The claim (with the daemon's allocation and reservations filled in: `effective_claim`)."""
    meta: dict[str, Any] = {"name": claim.meta.name, "namespace": claim.meta.namespace, "uid": claim.meta.uid}
    if claim.meta.labels:
        meta["labels"] = dict(claim.meta.labels)
    if claim.meta.annotations:
        meta["annotations"] = dict(claim.meta.annotations)
    if claim.meta.owner_references:
        meta["ownerReferences"] = [
            {
                "apiVersion": r.api_version,
                "kind": r.kind,
                "name": r.name,
                "uid": r.uid,
                **({"controller": True, "blockOwnerDeletion": True} if r.controller else {}),
            }
            for r in claim.meta.owner_references
        ]
    status: dict[str, Any] = {}
    if claim.allocation is not None:
        status["allocation"] = claim.allocation.to_json()
    if claim.reserved_for:
        status["reservedFor"] = [consumer_json(r) for r in claim.reserved_for]
    if claim.device_status:
        status["devices"] = device_statuses_json(claim.device_status)
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": spec_json(claim.spec),
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
            _tolerations_and_capacity(exactly, e.tolerations, e.capacity)
            entry["exactly"] = exactly
        if r.first_available:
            subs = []
            for s in r.first_available:
                sub = {
                    "name": s.name,
                    **_device_selection(s.device_class_name, s.selectors, s.allocation_mode, s.count),
                }
                _tolerations_and_capacity(sub, s.tolerations, s.capacity)
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


def _tolerations_and_capacity(
    out: dict[str, Any], tolerations: tuple[DeviceToleration, ...], capacity: CapacityRequirements | None
) -> None:
    if tolerations:
        out["tolerations"] = [t.to_json() for t in tolerations]
    if capacity is not None:
        out["capacity"] = capacity.to_json()
