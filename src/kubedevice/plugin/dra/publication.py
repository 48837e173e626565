"""What the DRA face publishes of the plugin's devices: which devices, with which taints, and the pool's
counter sets.

A healthy device is published; an unhealthy one only when the plugin has a `health_taint`, and then with
it (as NVIDIA's and Intel's drivers taint a failed GPU rather than hide it: the pods on it are evicted by
a NoExecute taint, and the scheduler sees why the device is not offered). The counter sets come from the
plugin's `shared_counters()`, called with every device of the face, healthy or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.dra.backend.slices import device_name
from kubedevice.plugin.dra.backend_api import PublishedDevice
from kubedevice.plugin.dra.device_model import CounterSet, DeviceCapacity, DeviceTaint
from kubedevice.plugin.dra.taints import TaintBook
from kubedevice.plugin.model import Device


@dataclass(frozen=True)
class Publication:
    devices: tuple[PublishedDevice, ...]
    counter_sets: tuple[CounterSet, ...]


def publication(plugin: DevicePlugin, taints: TaintBook, devices: Sequence[Device]) -> Publication:
    """The devices and counter sets to publish now. Raises what `shared_counters()` raises, and TypeError
    when it answers something else than CounterSets."""
    shown = [d for d in devices if d.healthy or taints.health_taint is not None]
    stamped = taints.stamp(
        [(d.id, device_name(d.id), taints.wanted(d.id, d.taints, d.healthy)) for d in shown]
    )
    sets = tuple(plugin.shared_counters(devices))
    wrong = [s for s in sets if not isinstance(s, CounterSet)]
    if wrong:
        raise TypeError(f"shared_counters() must return CounterSet objects, got {wrong[0]!r}")
    return Publication(tuple(published_device(d, stamped[d.id]) for d in shown), sets)


def published_device(device: Device, taints: tuple[DeviceTaint, ...] = ()) -> PublishedDevice:
    capacity: dict[str, str | DeviceCapacity] = dict(device.capacity)
    return PublishedDevice(
        id=device.id,
        attributes=dict(device.attributes),
        capacity=capacity,
        numa_nodes=device.numa_nodes,
        consumes_counters=tuple(device.consumes_counters),
        taints=taints,
        allow_multiple_allocations=device.allow_multiple_allocations,
        binding_conditions=tuple(device.binding_conditions),
        binding_failure_conditions=tuple(device.binding_failure_conditions),
        binds_to_node=device.binds_to_node,
    )
