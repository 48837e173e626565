"""What the status API and PodResources show of each resource and of each container's devices."""

from __future__ import annotations

from kubedevice.api.constants import HEALTHY, UNHEALTHY
from kubedevice.manager.devices import ResourceDevices
from kubedevice.manager.state import ManagerState
from kubedevice.manager.types import DeviceHealth, ResourceStatus


def registered_resources(state: ManagerState) -> list[ResourceStatus]:
    now = state.clock()
    out: list[ResourceStatus] = []
    for resource in sorted(set(state.endpoints) | set(state.devices)):
        primary = state.endpoints.get(resource)
        live = list(state.endpoint_store.get(resource, {}).values())
        live.sort(key=lambda e: e is not primary)
        devices = state.devices.get(resource, ResourceDevices())
        stopped = primary is None or primary.is_stopped
        stop_time = primary.stop_time if primary is not None else None
        options = primary.options if primary is not None else None
        out.append(
            ResourceStatus(
                resource_name=resource,
                state="stopped" if stopped else "running",
                stopped_seconds=(now - stop_time) if stopped and stop_time is not None else None,
                endpoints=[e.socket_path for e in live],
                healthy=len(devices.healthy),
                unhealthy=len(devices.unhealthy),
                allocated=len(state.allocated.get(resource, ())),
                free=len(devices.healthy - state.allocated.get(resource, set())),
                pre_start_required=bool(options and options.pre_start_required),
                get_preferred_allocation_available=bool(
                    options and options.get_preferred_allocation_available
                ),
                last_warning=state.warnings.get(resource),
            )
        )
    return out


def allocated_resources_status(
    state: ManagerState, pod_uid: str, container_name: str
) -> dict[str, dict[str, DeviceHealth]]:
    """resource -> device ID -> health, for a container's devices.

    "Unknown" when the resource has no running plugin or the plugin stopped reporting the device,
    where the kubelet would still say "Healthy".
    """
    resources = state.pod_devices.container_resources(pod_uid, container_name) or {}
    out: dict[str, dict[str, DeviceHealth]] = {}
    for resource, entry in sorted(resources.items()):
        endpoint = state.endpoints.get(resource)
        devices = state.devices.get(resource)
        health: dict[str, DeviceHealth] = {}
        for d in sorted(entry.device_ids()):
            reported = (
                devices.device_health(d)
                if devices is not None and endpoint is not None and not endpoint.is_stopped
                else None
            )
            health[d] = HEALTHY if reported == HEALTHY else UNHEALTHY if reported is not None else "Unknown"
        out[resource] = health
    return out


def resource_devices(state: ManagerState, resource: str) -> tuple[frozenset[str], frozenset[str]] | None:
    devices = state.devices.get(resource)
    if devices is None:
        return None
    return frozenset(devices.healthy), frozenset(devices.unhealthy)


def device_topology(state: ManagerState, resource: str) -> dict[str, tuple[int, ...]]:
    devices = state.devices.get(resource)
    return dict(devices.topology) if devices is not None else {}
