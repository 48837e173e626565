"""A candidate device of one search: a device of a complete pool, in search order, with what the search
checks of it besides its selectors (its node, its taints, the counters it consumes), resolved once when
the candidates are gathered; and how a claim constraint reads one of its attributes."""

from __future__ import annotations

from dataclasses import dataclass

from kubedevice.resource.model import DeviceID
from kubedevice.resource.slice_model import AttributeValue, ResourceSliceDocument, SliceDevice
from kubedevice.resource.taints import DeviceTaint
from kubedevice.scheduler.cel import CelDevice
from kubedevice.scheduler.counters import CounterUse

__all__ = ["Candidate", "lookup_attribute"]


@dataclass(slots=True)
class Candidate:
    """A device of a complete pool, in search order."""

    id: DeviceID
    device: SliceDevice
    cel: CelDevice | None = None
    #: The slice that published it (for the allocation's node selector).
    slice: ResourceSliceDocument | None = None
    #: False when its slice selects nodes per device and the device does not serve this node.
    for_node: bool = True
    #: Its taints: the driver's, then those of the DeviceTaintRules that select it.
    taints: tuple[DeviceTaint, ...] = ()
    #: The shared counters it consumes, resolved to slots of the search's SharedCounters.
    counter_use: CounterUse = ()
    #: True when the counters of its pool are overdrawn by allocated devices and it consumes some.
    counters_overdrawn: bool = False

    def text(self) -> str:
        return "/".join(self.id)


def lookup_attribute(candidate: Candidate, name: str) -> AttributeValue | None:
    """By the full name, or by `<name>` alone when `<domain>` is the device's driver."""
    attributes = candidate.device.attributes
    if name in attributes:
        return attributes[name]
    domain, sep, short = name.partition("/")
    if not sep or domain != candidate.id[0]:
        return None
    return attributes.get(short)
