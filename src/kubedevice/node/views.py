"""What the status API answers: the node's devices (`/node`) and its pods (`/pods`), as JSON-ready data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from kubedevice.manager import DeviceManager, RunContainerOptions
from kubedevice.node.pods import PodRecord
from kubedevice.node.topology import topology_view
from kubedevice.topology import TopologyManager


def _device_ids(manager: DeviceManager, resource: str) -> tuple[list[str], list[str]]:
    devices = manager.resource_devices(resource)
    if devices is None:
        return [], []
    healthy, unhealthy = devices
    return sorted(healthy), sorted(unhealthy)


def _numa_nodes(manager: DeviceManager, resource: str) -> dict[str, list[int]]:
    return {d: list(n) for d, n in sorted(manager.device_topology(resource).items())}


def node_view(
    manager: DeviceManager, checkpoint_path: Path, topology: TopologyManager, scope: str
) -> dict[str, Any]:
    """The `/node` answer; `scope` is the configured topology manager scope."""
    capacity, allocatable, _deleted = manager.get_capacity()
    resources: dict[str, Any] = {}
    for status in manager.registered_resources():
        healthy, unhealthy = _device_ids(manager, status.resource_name)
        resources[status.resource_name] = {
            "healthy": healthy,
            "unhealthy": unhealthy,
            "numaNodes": {
                d: list(n) for d, n in sorted(manager.device_topology(status.resource_name).items())
            },
            "endpoint": status.state,
            "stoppedSeconds": status.stopped_seconds,
            # Until the resource leaves capacity, unless its plugin registers again first.
            "graceSecondsLeft": (
                max(0.0, manager.stop_grace_period - status.stopped_seconds)
                if status.stopped_seconds is not None
                else None
            ),
            "allocated": status.allocated,
            "free": status.free,
            "endpoints": status.endpoints,
            "preStartRequired": status.pre_start_required,
            "getPreferredAllocationAvailable": status.get_preferred_allocation_available,
            "warning": status.last_warning,
        }
    return {
        "capacity": dict(sorted(capacity.items())),
        "allocatable": dict(sorted(allocatable.items())),
        "resources": resources,
        "checkpoint": {"path": str(checkpoint_path), "error": manager.checkpoint_error},
        "topology": topology_view(topology, scope),
        "registrationSocket": str(manager.socket_path),
    }


def run_options_view(options: RunContainerOptions | None) -> dict[str, Any]:
    opts = options if options is not None else RunContainerOptions()
    return {
        "envs": dict(opts.envs),
        "mounts": [
            {"containerPath": m.container_path, "hostPath": m.host_path, "readOnly": m.read_only}
            for m in opts.mounts
        ],
        "devices": [
            {"containerPath": d.path_in_container, "hostPath": d.path_on_host, "permissions": d.permissions}
            for d in opts.devices
        ],
        "annotations": dict(opts.annotations),
        "cdiDevices": list(opts.cdi_devices),
    }


class PodClaimsView(Protocol):
    """The DRA part of a pod's view: its claims, and each container's claims with their devices."""

    def pod_claims(self, record: PodRecord) -> list[dict[str, Any]]: ...

    def container_claims(self, record: PodRecord, container: str) -> list[dict[str, Any]]: ...

    def extended_claim(self, record: PodRecord) -> dict[str, Any] | None: ...

    def allocated_resources_status(self, record: PodRecord, container: str) -> list[dict[str, Any]]: ...

    def status(self, record: PodRecord) -> dict[str, Any]: ...


def pod_view(
    manager: DeviceManager,
    record: PodRecord,
    topology: TopologyManager,
    claims: PodClaimsView | None = None,
) -> dict[str, Any]:
    pod = record.pod
    hints = topology.pod_hints(pod.uid)
    containers: list[dict[str, Any]] = []
    app = {c.name for c in pod.containers}
    for c in [*pod.init_containers, *pod.containers]:
        devices = manager.get_devices(pod.uid, c.name) or {}
        options = run_options_view(record.run_options.get(c.name))
        containers.append(
            {
                "name": c.name,
                "devices": {r: sorted(ids) for r, ids in sorted(devices.items())},
                "topologyHint": hints[c.name].to_json() if c.name in hints else None,
                "runOptions": options,
                # DRA's CDI IDs first, then the device plugins' (what the runtime would be given).
                "cdiDevices": options["cdiDevices"],
                "claims": claims.container_claims(record, c.name) if claims is not None else [],
                # As the kubelet fills `containerStatuses`: an init container's stays empty.
                "allocatedResourcesStatus": (
                    allocated_resources_status(manager, record, c.name, claims) if c.name in app else []
                ),
            }
        )
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
        "file": record.manifest.file,
        "phase": record.phase,
        # The manifest is gone; the pod waits for its claims to be unprepared (kubectl's Terminating).
        "terminating": record.terminating,
        "reason": record.reason,
        "message": record.message,
        # The daemon's own why of a refusal, and what a pod runs without: beyond the kubelet's status.
        "detail": record.detail,
        "warnings": list(record.warnings),
        # Why a Pending pod's claims could not be allocated, per request (null when that is not why it
        # waits): beyond the scheduler's message, which devices each rule ruled out.
        "waiting": waiting_view(record),
        "resourceClaims": claims.pod_claims(record) if claims is not None else [],
        # The special claim of the extended resources DRA meets, as `status.extendedResourceClaimStatus`.
        "extendedResourceClaimStatus": claims.extended_claim(record) if claims is not None else None,
        # The conditions the daemon set (an eviction's DisruptionTarget), core/v1's `status.conditions`.
        "conditions": [c.to_json() for c in record.conditions],
        # The same claims in the API's shape (`status.resourceClaimStatuses`, `extendedResourceClaimStatus`),
        # for scripts that read a pod as the API server serves it, and the conditions.
        "status": _status(record, claims),
        "containers": containers,
    }


def _status(record: PodRecord, claims: PodClaimsView | None) -> dict[str, Any]:
    status = claims.status(record) if claims is not None else {}
    if record.conditions:
        status = {**status, "conditions": [c.to_json() for c in record.conditions]}
    return status


def waiting_view(record: PodRecord) -> dict[str, Any] | None:
    """`{"reason": ..., "requests": [RequestExplanation.to_json(), ...]}` while the pod is Pending
    because the search found nothing; None otherwise."""
    if record.phase != "Pending" or not record.explanation:
        return None
    return {"reason": record.reason, "requests": [e.to_json() for e in record.explanation]}


def allocated_resources_status(
    manager: DeviceManager, record: PodRecord, container: str, claims: PodClaimsView | None
) -> list[dict[str, Any]]:
    """A container's `allocatedResourcesStatus` as the kubelet fills it (KEP-4680): the device manager's
    entries, one per resource with each device ID, then the DRA manager's, one per claim it uses."""
    health = manager.allocated_resources_status(record.uid, container)
    entries = [
        {"name": resource, "resources": [{"resourceID": d, "health": h} for d, h in sorted(devices.items())]}
        for resource, devices in sorted(health.items())
    ]
    if claims is not None:
        entries.extend(claims.allocated_resources_status(record, container))
    return entries


def pods_view(
    manager: DeviceManager,
    records: Iterable[PodRecord],
    bad_files: Mapping[str, str],
    topology: TopologyManager,
    claims: PodClaimsView | None = None,
) -> dict[str, Any]:
    """`{"pods": [pod, ...], "manifestErrors": [{"file", "error"}, ...]}`: a script iterating the pods
    meets only pods; the files that could not be used are beside them."""
    return {
        "pods": [pod_view(manager, r, topology, claims) for r in records],
        "manifestErrors": [{"file": f, "error": e} for f, e in sorted(bad_files.items())],
    }
