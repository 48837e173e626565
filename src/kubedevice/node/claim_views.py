"""What the status API answers about DRA: claims (`/claims`, `/claims/<ns>/<name>`), ResourceSlices
(`/resourceslices`), the DRA part of `/node` and of each pod in `/pods`, as JSON-ready data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubedevice.checkpoint.dra_model import ClaimInfoState
from kubedevice.controlplane.plane import ControlPlane
from kubedevice.controlplane.slice_folder import SliceFolder
from kubedevice.dra import DRAError, DRAManager
from kubedevice.dra.claim_names import resolve
from kubedevice.dra.resource_health import ResourceHealth
from kubedevice.node.pods import PodRecord
from kubedevice.resource.claim_json import claim_json, consumer_json
from kubedevice.resource.device_status import device_statuses_json
from kubedevice.statusapi.contract import node_answer, prepared_state

#: namespace/name -> (the cache entry, prepared in this run)
Infos = Mapping[str, tuple[ClaimInfoState, bool]]


def claim_infos(dra: DRAManager) -> dict[str, tuple[ClaimInfoState, bool]]:
    return {state.key: (state, prepared) for state, prepared in dra.claim_infos()}


def _devices(state: ClaimInfoState) -> list[dict[str, Any]]:
    devices = []
    for driver, entries in sorted((state.driver_state or {}).items()):
        for d in entries or ():
            devices.append(
                {
                    "driver": driver,
                    "pool": d.pool_name,
                    "device": d.device_name,
                    "requestNames": list(d.request_names or ()),
                    "cdiDevices": list(d.cdi_device_ids or ()),
                    **({"shareID": d.share_id} if d.share_id is not None else {}),
                }
            )
    return devices


def claims_view(control: ControlPlane, dra: DRAManager, records: Iterable[PodRecord]) -> dict[str, Any]:
    """`/claims`: every claim (documents and generated ones) and every claim the DRA manager still holds
    (its document may be gone), sorted by namespace/name: allocation and who made it, reservation and who
    wrote it, the drivers' device status, the cache entry's pods, devices and CDI IDs, whether it was
    prepared in this run."""
    infos = claim_infos(dra)
    names = {r.uid: f"{r.pod.namespace}/{r.pod.name}" for r in records}
    claims = {c.meta.key: c for c in control.claims.claims()}
    out = []
    for key in sorted(set(claims) | set(infos)):
        claim = claims.get(key)
        document = control.documents.claims.get(key)
        record = control.store.get(key)
        state, prepared = infos.get(key, (None, False))
        namespace, _, name = key.partition("/")
        cached_uid = state.claim_uid if state is not None else None
        # The document that is this claim object (not a replaced one the cache still holds).
        written = (
            document
            if document is not None and claim is not None and document.meta.uid == claim.meta.uid
            else None
        )
        entry: dict[str, Any] = {
            "namespace": namespace,
            "name": name,
            "uid": claim.meta.uid if claim is not None else cached_uid,
            "file": document.meta.source if document is not None else None,
            "generatedFor": record.generated_for if record is not None else None,
            "extendedFor": record.extended_for if record is not None else None,
            "allocation": claim.allocation.to_json() if claim is not None and claim.allocation else None,
            "allocatedBy": _by(
                claim is not None and claim.allocation is not None,
                written is not None and written.allocation is not None,
            ),
            "reservedFor": [consumer_json(r) for r in claim.reserved_for or ()] if claim is not None else [],
            "reservedBy": _by(claim is not None, written is not None and written.reserved_for is not None),
            # The claim's `status.devices`, as its drivers wrote them (PUT .../status).
            "statusDevices": device_statuses_json(claim.device_status) if claim is not None else [],
            # The cache entry: the pods it lists, its devices; `prepared` says it was prepared in this run
            # of the daemon (an entry restored from the checkpoint is not, though its pods run).
            "cached": state is not None,
            "cachedUID": cached_uid,
            "prepared": prepared,
            # The claims table's "prepared" column: `yes`, `restored` (from the checkpoint, in use) or `no`.
            "preparedState": prepared_state(prepared, state is not None),
            "pods": [{"uid": uid, "pod": names.get(uid)} for uid in sorted(state.pod_uids or ())]
            if state is not None
            else [],
            "devices": _devices(state) if state is not None else [],
        }
        entry["cdiDevices"] = list(dict.fromkeys(c for d in entry["devices"] for c in d["cdiDevices"]))
        out.append(entry)
    return {"claims": out}


def _by(present: bool, in_manifest: bool) -> str | None:
    """Who wrote a claim's allocation or reservation: the manifest, the daemon, or None (nobody)."""
    if not present:
        return None
    return "manifest" if in_manifest else "daemon"


def claim_answer(control: ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    """`/claims/<ns>/<name>`: the claim in the v1 shape, None when there is none."""
    claim = control.claims.claim(namespace, name)
    return claim_json(claim) if claim is not None else None


def slices_view(folder: SliceFolder) -> dict[str, Any]:
    """`/resourceslices`: every slice read, with the error of each one ignored or reported."""
    return {"resourceSlices": folder.view(), "fileErrors": folder.file_errors()}


def node_dra_view(
    node_name: str,
    dra: DRAManager,
    folder: SliceFolder,
    warnings: list[str] | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """What `/node` adds: the node's name and labels, the registered DRA drivers and their slices'
    devices, and the `warnings` of extended resources offered both by a device plugin and by a
    DeviceClass."""
    devices = folder.devices_by_driver()
    drivers: dict[str, Any] = {}
    for status in dra.drivers():
        drivers[status.name] = {
            "endpoints": [
                {
                    "endpoint": e.endpoint,
                    "service": e.service,
                    "healthService": e.health_service,
                    "connected": e.connected,
                }
                for e in status.endpoints
            ],
            "wipePending": status.wipe_pending,
            "devices": devices.get(status.name, []),
        }
    # Slices of drivers that are not registered stay usable by the allocator: shown too.
    unregistered = {d: {"devices": v} for d, v in sorted(devices.items()) if d not in drivers}
    return {
        **node_answer(node_name, node_labels),
        "draDrivers": drivers,
        "unregisteredSliceDrivers": unregistered,
        "extendedResourceWarnings": list(warnings or ()),
    }


def pod_claims_view(record: PodRecord, control: ControlPlane, infos: Infos) -> list[dict[str, Any]]:
    """A pod's claims: each pod claim, the claim it resolves to, and whether its cache entry lists the pod."""
    if not record.has_claims:
        return []
    pod = record.dra_pod
    out: list[dict[str, Any]] = []
    for pod_claim in pod.resource_claims:
        try:
            resolved = resolve(pod, pod_claim)
        except DRAError as err:
            out.append({"name": pod_claim.name, "resourceClaimName": None, "error": str(err)})
            continue
        claim = resolved.claim_name if resolved is not None else None
        state, prepared = infos.get(f"{pod.namespace}/{claim}", (None, False))
        doc = control.claims.claim(pod.namespace, claim) if claim is not None else None
        out.append(
            {
                "name": pod_claim.name,
                "resourceClaimName": claim,
                "resourceClaimTemplateName": pod_claim.resource_claim_template_name,
                "uid": doc.meta.uid if doc is not None else None,
                "prepared": state is not None and pod.uid in (state.pod_uids or ()),
                "preparedThisRun": prepared,
            }
        )
    return out


def container_claims_view(dra: DRAManager, record: PodRecord, container: str) -> list[dict[str, Any]]:
    """A container's claims and their devices, each CDI ID once (PodResources repeats them); empty while
    its claims are not prepared."""
    if not record.has_claims:
        return []
    pod = record.dra_pod
    c = pod.container(container)
    special = pod.extended_resource_claim
    mapped = special is not None and any(m.container_name == container for m in special.request_mappings)
    if c is None or not (c.claims or mapped):
        return []
    try:
        infos = dra.get_container_claim_infos(pod, c)
    except DRAError:
        return []
    out = []
    for state in infos:
        devices = _devices(state)
        out.append(
            {
                "claim": state.key,
                "devices": [
                    {k: d[k] for k in ("driver", "pool", "device", "shareID") if k in d} for d in devices
                ],
                "cdiDevices": list(dict.fromkeys(cdi for d in devices for cdi in d["cdiDevices"])),
            }
        )
    return out


def container_health_view(dra: DRAManager, record: PodRecord, container: str) -> list[dict[str, Any]]:
    """The container's `allocatedResourcesStatus` entries of its claims (core/v1's field names; `message`
    only when the driver gave one, as the API leaves it out)."""
    if not record.has_claims:
        return []
    pod = record.dra_pod
    c = pod.container(container)
    if c is None:
        return []
    return [
        {"name": status.name, "resources": [_health_json(r) for r in status.resources]}
        for status in dra.allocated_resources_status(pod, c)
    ]


def _health_json(r: ResourceHealth) -> dict[str, Any]:
    out = {"resourceID": r.resource_id, "health": r.health}
    if r.message:
        out["message"] = r.message
    return out


def extended_claim_view(record: PodRecord) -> dict[str, Any] | None:
    """The pod's `status.extendedResourceClaimStatus` (Go's field names), None when DRA meets none of its
    extended resources."""
    if not record.routes:
        return None
    special = record.dra_pod.extended_resource_claim
    if special is None:
        return None
    return {
        "resourceClaimName": special.resource_claim_name,
        "requestMappings": [
            {
                "containerName": m.container_name,
                "resourceName": m.resource_name,
                "requestName": m.request_name,
            }
            for m in special.request_mappings
        ],
    }


def claim_statuses_view(record: PodRecord) -> list[dict[str, Any]]:
    """The pod's `status.resourceClaimStatuses` as the API serves it: an entry per pod claim made from a
    template (the claim controller writes none for a claim named in the spec), in spec order, with
    `resourceClaimName` left out when the pod needs no claim for it (Go's `omitempty`)."""
    if not record.has_claims:
        return []
    pod = record.dra_pod
    out: list[dict[str, Any]] = []
    for pod_claim in pod.resource_claims:
        if pod_claim.name not in pod.claim_statuses:
            continue  # not made yet, or named in the spec
        entry: dict[str, Any] = {"name": pod_claim.name}
        generated = pod.claim_statuses[pod_claim.name]
        if generated is not None:
            entry["resourceClaimName"] = generated
        out.append(entry)
    return out


def pod_status_view(record: PodRecord) -> dict[str, Any]:
    """The DRA fields of the pod's `status` in core/v1's names, each left out when empty or unset as the
    API server leaves it out, so a script written against `kubectl get pod -o json` reads them as is."""
    status: dict[str, Any] = {}
    claim_statuses = claim_statuses_view(record)
    if claim_statuses:
        status["resourceClaimStatuses"] = claim_statuses
    extended = extended_claim_view(record)
    if extended is not None:
        status["extendedResourceClaimStatus"] = extended
    return status


class DRAPodView:
    """The DRA part of `/pods` (views.PodClaimsView), over one answer's snapshot of the claim cache."""

    def __init__(self, control: ControlPlane, dra: DRAManager) -> None:
        self._control = control
        self._dra = dra
        self._infos = claim_infos(dra)

    def pod_claims(self, record: PodRecord) -> list[dict[str, Any]]:
        return pod_claims_view(record, self._control, self._infos)

    def container_claims(self, record: PodRecord, container: str) -> list[dict[str, Any]]:
        return container_claims_view(self._dra, record, container)

    def extended_claim(self, record: PodRecord) -> dict[str, Any] | None:
        return extended_claim_view(record)

    def allocated_resources_status(self, record: PodRecord, container: str) -> list[dict[str, Any]]:
        return container_health_view(self._dra, record, container)

    def status(self, record: PodRecord) -> dict[str, Any]:
        return pod_status_view(record)
