"""What a ResourceSlice publishes, in the internal (resource.k8s.io/v1) shape: its devices with their
attributes, capacities, counters, taints and node selection; the slice; and a driver's pool at its highest
generation, as the allocator gathers it (slice_document.py reads a slice into these).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from kubedevice.resource.capacity import DeviceCapacity
from kubedevice.resource.counters import CounterSet, DeviceCounterConsumption
from kubedevice.resource.model import ObjectMeta
from kubedevice.resource.node_selector import NodeSelector
from kubedevice.resource.taints import DeviceTaint

__all__ = ["LIST_KINDS", "AttributeKind", "AttributeValue", "Pool", "ResourceSliceDocument", "SliceDevice"]

#: A device attribute's field: one value, or (`ints`, `bools`, `strings`, `versions`: DRAListTypeAttributes,
#: alpha upstream) a non-empty list of values of one type.
AttributeKind = Literal["int", "bool", "string", "version", "ints", "bools", "strings", "versions"]
#: The list kinds, each with the kind of its elements.
LIST_KINDS: Mapping[str, AttributeKind] = {
    "ints": "int",
    "bools": "bool",
    "strings": "string",
    "versions": "version",
}


@dataclass(frozen=True, slots=True)
class AttributeValue:
    """One attribute: `kind` is its field's name (`int`, ..., `ints`, ...); a list kind's `value` is a
    tuple of its elements."""

    kind: AttributeKind
    value: int | bool | str | tuple[int, ...] | tuple[bool, ...] | tuple[str, ...]

    @property
    def scalar_kind(self) -> AttributeKind:
        """The kind of one element: `int` for both `int` and `ints`."""
        return LIST_KINDS.get(self.kind, self.kind)

    @property
    def elements(self) -> tuple[int | bool | str, ...]:
        """The values as a tuple: one for a scalar, every element of a list."""
        return self.value if isinstance(self.value, tuple) else (self.value,)

    def as_set(self) -> tuple[AttributeKind, frozenset[int | bool | str]]:
        """Upstream's `attributeAsSet` (constraint.go): a scalar is a one-element set, a list the set of its
        elements (order and duplicates ignored), each with its element kind: values of different kinds
        never meet. A version compares as its text (semver 2.0.0 versions are minimal, so equal versions
        have equal text)."""
        return self.scalar_kind, frozenset(self.elements)


@dataclass(frozen=True, slots=True)
class SliceDevice:
    name: str
    #: Keys as published: qualified `domain/name` or bare `name` (the driver's domain is implied).
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    #: Capacity name as published -> its value (and `requestPolicy`).
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    #: The left-out feature the device (or its slice) uses; such a device is never a candidate.
    unsupported: str | None = None
    #: `allowMultipleAllocations`: allocated to any number of requests while its capacity lasts.
    allow_multiple_allocations: bool = False
    #: Partitionable devices: the shared counters the device uses up while allocated.
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    #: Per-device node selection (its slice has `perDeviceNodeSelection`): exactly one is set.
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    #: The driver's taints (a DeviceTaintRule adds its own at allocation time).
    taints: tuple[DeviceTaint, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: An allocation with this device is bound to the node it was made for.
    binds_to_node: bool = False

    def serves(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Per-device node selection: whether the device is available on this node."""
        if self.node_name:
            return self.node_name == node_name
        if self.all_nodes:
            return True
        return self.node_selector is not None and self.node_selector.matches(node_name, labels)


@dataclass(frozen=True, slots=True)
class ResourceSliceDocument:
    KIND: ClassVar[str] = "ResourceSlice"

    meta: ObjectMeta
    driver: str
    node_name: str = ""
    all_nodes: bool = False
    pool: str = ""
    generation: int = 0
    slice_count: int = 1
    devices: tuple[SliceDevice, ...] = ()
    #: A left-out feature used at the slice level (every device of it is then marked too).
    unsupported: str | None = None
    #: `spec.nodeSelector`: the nodes the slice serves, by label (or None).
    node_selector: NodeSelector | None = None
    #: Each device says which nodes it serves (`SliceDevice.serves`).
    per_device_node_selection: bool = False
    #: Counter sets the pool offers (1.35+ publishes them in a slice without devices; older drivers
    #: beside the devices).
    shared_counters: tuple[CounterSet, ...] = ()


@dataclass(frozen=True, slots=True)
class Pool:
    """A driver's pool at its highest generation; `complete` when every slice of that generation is there."""

    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSliceDocument, ...] = ()
    complete: bool = True
    #: Why the pool cannot be used at all (e.g. a device name twice in one generation), or None.
    invalid: str | None = None
    #: The counter sets of the pool's slices, by name.
    counter_sets: Mapping[str, CounterSet] = field(default_factory=dict)
    #: Slices of the pool's generation that serve other nodes: never candidates, but their allocated
    #: devices use up the pool's counters too.
    other_slices: tuple[ResourceSliceDocument, ...] = ()

    @property
    def devices(self) -> tuple[SliceDevice, ...]:
        """The pool's devices in published order (slices in order, devices in spec order)."""
        return tuple(d for s in self.slices for d in s.devices)
