"""The device manager's state: what the kubelet's ManagerImpl holds, as one explicit record.

The endpoint lifecycle, the allocator, the topology hints and the queries each read and change parts of
it; the facade (:class:`~kubedevice.manager.manager.DeviceManager`) owns it. Everything here is mutated
on the event loop only, between awaits.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kubedevice.checkpoint import CheckpointData
from kubedevice.manager.changes import ChangeFeed
from kubedevice.manager.devices import ResourceDevices
from kubedevice.manager.endpoint import Endpoint
from kubedevice.manager.free_devices import FreeDevices
from kubedevice.manager.pod_devices import PodDevices


@dataclass(slots=True)
class ManagerState:
    clock: Callable[[], float] = time.monotonic
    #: resource -> the primary endpoint (last connected; may be stopped).
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    #: resource -> socket path -> live endpoint, in connection order (the kubelet's endpointStore).
    endpoint_store: dict[str, dict[str, Endpoint]] = field(default_factory=dict)
    #: resource -> devices; a key here is the kubelet's "healthyDevices has r".
    devices: dict[str, ResourceDevices] = field(default_factory=dict)
    #: resource -> the last problem found in its plugin's device list.
    warnings: dict[str, str] = field(default_factory=dict)
    pod_devices: PodDevices = field(default_factory=PodDevices)
    #: resource -> devices recorded in pod_devices (the kubelet's allocatedDevices).
    allocated: dict[str, set[str]] = field(default_factory=dict)
    #: resource -> devices picked by allocations still waiting on a plugin.
    in_flight: dict[str, set[str]] = field(default_factory=dict)
    #: resource -> healthy devices neither allocated nor in flight. Picks and failed allocations keep it
    #: up to date; anything else that changes the devices or the allocations drops it, and the next
    #: admission rebuilds it (rebuilding 10^4 IDs per admission made admission O(devices)).
    free: dict[str, FreeDevices] = field(default_factory=dict)
    #: The checkpoint's registered devices, reused by every write until the devices change: the
    #: checkpoint encoder recognises the same object and neither compares nor copies its lists.
    registered: dict[str, list[str]] | None = None
    changes: ChangeFeed = field(default_factory=ChangeFeed)
    #: resource -> how many devices (healthy or not) sit on each NUMA node set: what every topology hint
    #: of the resource compares against, kept until its devices change.
    node_sets: dict[str, Counter[tuple[int, ...]]] = field(default_factory=dict)

    def is_device_plugin_resource(self, resource: str) -> bool:
        return resource in self.devices or resource in self.allocated

    def devices_changed(self) -> None:
        """Some resource's devices changed: the free sets and the registered devices are rebuilt."""
        self.free.clear()
        self.registered = None
        self.node_sets.clear()

    def allocations_changed(self) -> None:
        """Allocations were restored or dropped wholesale: recount them and rebuild the free sets."""
        self.allocated = self.pod_devices.devices()
        self.free.clear()

    def checkpoint_data(self) -> CheckpointData:
        entries = self.pod_devices.to_checkpoint()
        if self.registered is None:
            self.registered = {r: list(d.healthy) for r, d in self.devices.items()}
        return CheckpointData(pod_device_entries=entries or None, registered_devices=self.registered)
