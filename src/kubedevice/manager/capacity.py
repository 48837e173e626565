"""Capacity and allocatable (the kubelet's `GetCapacity`, `GetAllocatableDevices` and the allocated counts
that `sanitizeNodeAllocatable` keeps node allocatable above).

`get_capacity` is also where the stop grace period ends: a resource whose plugin stayed away longer is
removed, as the kubelet's node status loop does through it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubedevice.manager.state import ManagerState
from kubedevice.manager.types import Change

log = logging.getLogger(__name__)


def get_capacity(
    state: ManagerState, stop_grace_period: float, checkpoint_soon: Callable[[], None]
) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """(capacity, allocatable, deleted resources); drops resources past the grace period."""
    now = state.clock()
    capacity: dict[str, int] = {}
    allocatable: dict[str, int] = {}
    deleted: list[str] = []
    for resource, devices in state.devices.items():
        endpoint = state.endpoints.get(resource)
        if endpoint is None or endpoint.grace_period_expired(now, stop_grace_period):
            deleted.append(resource)
            continue
        capacity[resource] = devices.capacity
        allocatable[resource] = len(devices.healthy)
    for resource in deleted:
        del state.devices[resource]
        state.endpoints.pop(resource, None)
        state.warnings.pop(resource, None)
    if deleted:
        state.devices_changed()
        log.info("resources past their stop grace period were removed: %s", ", ".join(deleted))
        for resource in deleted:
            state.changes.publish(Change("deleted", resource))
        checkpoint_soon()
    return capacity, allocatable, deleted


def get_allocatable_devices(state: ManagerState) -> dict[str, dict[str, tuple[int, ...]]]:
    """resource -> healthy device ID -> its NUMA nodes (empty: no topology)."""
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for resource, devices in state.devices.items():
        if not devices.reported:
            continue
        topology = devices.topology
        out[resource] = {d: topology.get(d, ()) for d in devices.healthy}
    return out


def allocated_device_counts(state: ManagerState) -> dict[str, int]:
    """resource -> devices held by containers; node allocatable never goes below these."""
    return {r: len(ids) for r, ids in state.allocated.items()}
