"""The health of a container's claimed devices in its status (KEP-4680, `ResourceHealthStatus`): the
kubelet's `UpdateAllocatedResourcesStatus` of the DRA manager, and the pods a health change concerns.

Each claim a container names (`resources.claims[]`) whose claim is in the cache becomes one entry,
`claim:<pod claim>` or `claim:<pod claim>/<request>`, listing the devices that serve it: each device's
resource ID is its first CDI device ID, else `<driver>/<pool>/<device>`; an ID is listed once. A device
the driver's health stream does not report (or reported too long ago) is Unknown. A claim with no such
device gives no entry. The special claim of DRA-backed extended resources gives
`claim:<claim>/<request>` per request mapped to the container, as the API's field documentation says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kubedevice.dra.claim_info import ClaimInfo, ClaimInfoCache
from kubedevice.dra.claim_names import resolve
from kubedevice.dra.errors import DRAError
from kubedevice.dra.health import DeviceHealthInfo
from kubedevice.dra.types import DRAContainer, DRAPod

#: driver, pool, device -> that device's health now.
HealthLookup = Callable[[str, str, str], DeviceHealthInfo]


@dataclass(frozen=True, slots=True)
class ResourceHealth:
    """core/v1 `ResourceHealth`: one device and its health ("Healthy", "Unhealthy" or "Unknown"), with
    the driver's message when it gave one (the `ResourceHealthStatusMessage` feature)."""

    resource_id: str
    health: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class AllocatedResourceStatus:
    """core/v1 `ResourceStatus`, one entry of a container's `allocatedResourcesStatus`."""

    name: str
    resources: tuple[ResourceHealth, ...]


def allocated_resources_status(
    cache: ClaimInfoCache, health_of: HealthLookup, pod: DRAPod, container: DRAContainer
) -> list[AllocatedResourceStatus]:
    """The container's claimed devices and their health, in the order its claims are listed."""
    found: dict[str, AllocatedResourceStatus] = {}
    for name, info, request in _claimed(cache, pod, container):
        resources = _resource_health(info, request, health_of)
        if resources:
            found[name] = AllocatedResourceStatus(name, resources)
        else:
            found.pop(name, None)  # the kubelet drops an entry left without devices
    return list(found.values())


def _claimed(
    cache: ClaimInfoCache, pod: DRAPod, container: DRAContainer
) -> Iterator[tuple[str, ClaimInfo, str]]:
    """(entry name, cache entry, request or "") per claim of the container whose entry exists."""
    pod_claims = {c.name: c for c in pod.resource_claims}
    for claim in container.claims:
        pod_claim = pod_claims.get(claim.name)
        try:
            resolved = resolve(pod, pod_claim) if pod_claim is not None else None
        except DRAError:
            resolved = None  # its claim is not made yet
        info = cache.get(pod.namespace, resolved.claim_name) if resolved is not None else None
        if info is not None:
            name = f"claim:{claim.name}/{claim.request}" if claim.request else f"claim:{claim.name}"
            yield name, info, claim.request
    special = pod.extended_resource_claim
    if special is not None:
        info = cache.get(pod.namespace, special.resource_claim_name)
        for mapping in special.request_mappings:
            request = mapping.request_name
            if info is not None and mapping.container_name == container.name:
                yield f"claim:{special.resource_claim_name}/{request}", info, request


def _resource_health(info: ClaimInfo, request: str, health_of: HealthLookup) -> tuple[ResourceHealth, ...]:
    seen: dict[str, ResourceHealth] = {}
    for driver, device in info.devices_serving(request):
        resource_id = (
            device.cdi_device_ids[0]
            if device.cdi_device_ids
            else f"{driver}/{device.pool_name}/{device.device_name}"
        )
        if resource_id not in seen:
            health = health_of(driver, device.pool_name, device.device_name)
            seen[resource_id] = ResourceHealth(resource_id, health.health, health.message)
    return tuple(seen.values())


def pods_using(cache: ClaimInfoCache, driver: str, devices: Iterable[tuple[str, str]]) -> list[str]:
    """The pods whose claims hold any of `driver`'s (pool, device) keys, sorted: whom a health change
    concerns (the kubelet's `HandleWatchResourcesStream` sends them a status update)."""
    wanted = set(devices)
    pods: set[str] = set()
    for info in cache.entries():
        held = info.driver_state.get(driver) or ()
        if any((d.pool_name, d.device_name) in wanted for d in held):
            pods.update(info.pod_uids)
    return sorted(pods)
