"""The kubelet's readCheckpoint: the manager's state restored from its checkpoint file at start.

Pod devices come back as they were; every resource that was registered starts with a stopped endpoint
(no devices until its plugin registers again, and removed after the stop grace period if it never does).
A file that cannot be used is set aside and the manager starts empty, as the kubelet continues.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from kubedevice.checkpoint import CheckpointError, CheckpointNotFoundError, CheckpointStore, collector_paused
from kubedevice.manager.devices import ResourceDevices
from kubedevice.manager.endpoint import Endpoint
from kubedevice.manager.pod_devices import PodDevices
from kubedevice.manager.state import ManagerState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Restored:
    #: Why the checkpoint could not be read, if it could not.
    error: str | None = None
    #: Where the unreadable checkpoint was moved, if it was.
    quarantined: Path | None = None


async def restore_checkpoint(state: ManagerState, store: CheckpointStore) -> Restored:
    try:
        decoded = await asyncio.to_thread(store.read)
    except CheckpointNotFoundError:
        log.info("no checkpoint at %s: starting empty", store.path)
        return Restored()
    except (CheckpointError, OSError) as err:
        log.error(
            "Continue after failing to read checkpoint file %s. Device allocation info may NOT be "
            "up-to-date: %s",
            store.path,
            err,
        )
        quarantined: Path | None = None
        try:
            quarantined = await asyncio.to_thread(store.quarantine)
            log.error("the unreadable checkpoint was moved to %s", quarantined)
        except CheckpointError as qerr:
            log.error("%s", qerr)
        return Restored(str(err), quarantined)
    data = decoded.data
    with collector_paused():
        state.pod_devices = PodDevices.from_checkpoint(data.pod_device_entries or [])
        state.allocations_changed()
    now = state.clock()
    for resource in data.registered_devices or {}:
        state.devices[resource] = ResourceDevices()
        state.endpoints[resource] = Endpoint.stopped(resource, now)
    state.devices_changed()
    return Restored()
