"""The plain data a plugin author deals in: devices and what a container gets for them.

These are deliberately not protobuf messages: an author should never need the wire types.
The conversion to the wire lives in `wire.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kubedevice.cdi_names import parse_qualified_name
from kubedevice.plugin.dra.device_model import (
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    refuse,
)
from kubedevice.resource.capacity_rules import validate_capacity
from kubedevice.resource.device_rules import MAX_CONSUMPTIONS, MAX_TAINTS, validate_binding_conditions
from kubedevice.resource.field_errors import FieldError

_PERMISSION_LETTERS = frozenset("rwm")

#: The two faces a device can be offered on (`Device.api`, read under ``serve(api="both")``).
Face = Literal["device-plugin", "dra"]
FACES: tuple[Face, ...] = ("device-plugin", "dra")


@dataclass(frozen=True)
class Device:
    """One schedulable unit of the resource, as the kubelet sees it in ListAndWatch.

    `numa_nodes` is the device's NUMA affinity; empty means "no topology" (the kubelet then
    treats it as aligned with nothing in particular).

    The DRA face also publishes `attributes` (name -> str, int or bool; a string ``"version:1.2.3"``
    is published as a semantic version), `capacity` (name -> quantity such as ``"16Gi"``, or a
    `DeviceCapacity` with a request policy) and the DRA fields below; the device plugin face ignores them.
    `api` says which face a device goes to under ``serve(api="both")``.
    """

    #: The ID the kubelet knows the device by: unique within the plugin, no whitespace or commas.
    id: str
    #: An unhealthy device stays in the node's capacity but not in allocatable: no new container gets it.
    healthy: bool = True
    #: The NUMA nodes the device is attached to (its TopologyInfo); empty: no topology preference.
    numa_nodes: tuple[int, ...] = ()
    # Left out of the hash (a mapping has none), kept in equality: a changed attribute is a device change.
    attributes: Mapping[str, str | int | bool] = field(default_factory=dict, hash=False)
    capacity: Mapping[str, str | DeviceCapacity] = field(default_factory=dict, hash=False)
    api: Face | None = None
    #: DRA: what the device uses up of the pool's counter sets (`DevicePlugin.shared_counters`) while it is
    #: allocated: a MIG-style partition and its whole GPU consume the same set, so never both at once.
    consumes_counters: Sequence[DeviceCounterConsumption] = field(default=(), hash=False)
    #: DRA: the driver's own taints of the device; `DevicePlugin.health_taint` and `set_device_taints` add
    #: theirs when it is published.
    taints: Sequence[DeviceTaint] = field(default=(), hash=False)
    #: DRA: the device may be allocated to several requests at once until its capacities are used up
    #: (consumable capacity); each allocation gets a share ID and its consumed capacity.
    allow_multiple_allocations: bool = False
    #: DRA: condition types that must be True on the allocated device's status before its pod is bound
    #: (`DevicePlugin.set_device_condition`): an attach-on-demand device. Only with failure conditions.
    binding_conditions: Sequence[str] = ()
    #: DRA: condition types that, True on the allocated device's status, fail the binding: the claim is
    #: allocated again. Only with binding conditions.
    binding_failure_conditions: Sequence[str] = ()
    #: DRA: an allocation of the device is bound to the node it was made for.
    binds_to_node: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"device ID must be a non-empty string, got {self.id!r}")
        if any(ch.isspace() or ch == "," for ch in self.id):
            raise ValueError(f"device ID {self.id!r} must not contain whitespace or commas")
        # Accept any iterable of ints from authors, but store a tuple so devices stay hashable.
        nodes = tuple(self.numa_nodes)
        for node in nodes:
            if not isinstance(node, int) or isinstance(node, bool) or node < 0:
                raise ValueError(f"device {self.id!r}: NUMA node must be a non-negative int, got {node!r}")
        object.__setattr__(self, "numa_nodes", nodes)
        for name, value in dict(self.attributes).items():
            if not isinstance(name, str) or not name:
                raise ValueError(
                    f"device {self.id!r}: attribute names must be non-empty strings, got {name!r}"
                )
            if not isinstance(value, (str, int, bool)):
                raise ValueError(
                    f"device {self.id!r}: attribute {name!r} must be a str, int or bool, got {value!r}"
                )
        for name, quantity in dict(self.capacity).items():
            if (
                not isinstance(name, str)
                or not name
                or not isinstance(quantity, (str, DeviceCapacity))
                or not quantity
            ):
                raise ValueError(
                    f"device {self.id!r}: capacity entries must map a name to a quantity string such as "
                    f"'16Gi' (or a DeviceCapacity), got {name!r}: {quantity!r}"
                )
        if self.api is not None and self.api not in FACES:
            raise ValueError(f'device {self.id!r}: api must be "device-plugin" or "dra", got {self.api!r}')
        # Own copies: a device is a value, and the author's dicts may change after it is made.
        object.__setattr__(self, "attributes", dict(self.attributes))
        object.__setattr__(self, "capacity", dict(self.capacity))
        for name in ("consumes_counters", "taints", "binding_conditions", "binding_failure_conditions"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        refuse(f"device {self.id!r}", self._dra_errors())

    def _dra_errors(self) -> list[FieldError]:
        """The DRA fields as the API server checks them (the device's own types checked themselves)."""
        for kind, items in (
            (DeviceCounterConsumption, self.consumes_counters),
            (DeviceTaint, self.taints),
        ):
            wrong = [i for i in items if not isinstance(i, kind)]
            if wrong:
                raise ValueError(f"device {self.id!r}: expected {kind.__name__} objects, got {wrong[0]!r}")
        capacity = {
            name: value.to_json() if isinstance(value, DeviceCapacity) else {"value": value}
            for name, value in self.capacity.items()
        }
        errors = validate_capacity(capacity, self.allow_multiple_allocations, "capacity")
        sets = [c.counter_set for c in self.consumes_counters]
        if len(sets) > MAX_CONSUMPTIONS:
            errors.append(FieldError.too_many("consumesCounters", len(sets), MAX_CONSUMPTIONS))
        errors += [FieldError.duplicate("consumesCounters", s) for i, s in enumerate(sets) if s in sets[:i]]
        if len(self.taints) > MAX_TAINTS:
            errors.append(FieldError.too_many("taints", len(self.taints), MAX_TAINTS))
        return errors + validate_binding_conditions(
            list(self.binding_conditions), list(self.binding_failure_conditions), "device"
        )


@dataclass(frozen=True)
class Mount:
    """A host path bind-mounted into the container."""

    #: Where the container sees it; absolute.
    container_path: str
    #: The path on the node; absolute.
    host_path: str
    #: Whether the container may only read it.
    read_only: bool = False

    def __post_init__(self) -> None:
        _require_absolute("mount container_path", self.container_path)
        _require_absolute("mount host_path", self.host_path)


@dataclass(frozen=True)
class DeviceSpec:
    """A device node made available in the container, with its cgroup permissions (any of r, w, m)."""

    #: The device node's path inside the container; absolute.
    container_path: str
    #: The device node on the node, e.g. /dev/widget0; absolute.
    host_path: str
    #: The container's cgroup access: any of r (read), w (write), m (mknod).
    permissions: str = "rw"

    def __post_init__(self) -> None:
        _require_absolute("device container_path", self.container_path)
        _require_absolute("device host_path", self.host_path)
        if not self.permissions or not set(self.permissions) <= _PERMISSION_LETTERS:
            raise ValueError(
                f"device {self.host_path}: permissions must be a non-empty combination of r, w, m, "
                f"got {self.permissions!r}"
            )


@dataclass(frozen=True)
class Allocation:
    """What one container receives for the devices it was given: the kubelet's run options for it."""

    #: Environment variables set in the container.
    envs: Mapping[str, str] = field(default_factory=dict)
    #: Host paths bind-mounted into the container.
    mounts: Sequence[Mount] = ()
    #: Device nodes the container gets, with their cgroup permissions.
    devices: Sequence[DeviceSpec] = ()
    #: Annotations handed to the container runtime with the container.
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: Fully qualified CDI device names (vendor/class=name) the runtime resolves from its spec folders.
    cdi_devices: Sequence[str] = ()

    def __post_init__(self) -> None:
        for key, value in [*self.envs.items(), *self.annotations.items()]:
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise ValueError(f"env and annotation entries must be non-empty str keys to str, got {key!r}")
        for name in self.cdi_devices:
            if not isinstance(name, str):
                raise ValueError(f"CDI device names must be str (vendor.com/class=name), got {name!r}")
            parse_qualified_name(name)


@dataclass(frozen=True)
class PluginOptions:
    """What the plugin tells the kubelet in DevicePluginOptions."""

    #: The kubelet calls PreStartContainer before each start of a container using the devices.
    pre_start_required: bool = False
    #: The kubelet calls GetPreferredAllocation before Allocate.
    get_preferred_allocation_available: bool = False


def _require_absolute(what: str, path: str) -> None:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"{what} must be an absolute path, got {path!r}")
