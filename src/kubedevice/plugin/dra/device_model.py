"""What a DRA device publishes beyond its attributes, as a driver declares it: counter sets and what each
device consumes of them (partitionable devices, MIG-style), taints, capacities shared through request
policies (consumable capacity).

Each is checked when it is made, with the API server's own rules (`kubedevice.resource.device_rules`), so
a bad value fails in the driver's code with the field named, not later at the API server; `to_json()` is
its `resource.k8s.io/v1` form. Quantities are strings as Kubernetes writes them (`"40Gi"`, `"7"`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from kubedevice.resource.capacity_rules import validate_capacity
from kubedevice.resource.device_rules import (
    validate_consumption,
    validate_counter_set,
    validate_taint,
)
from kubedevice.resource.field_errors import FieldError
from kubedevice.resource.taints import DeviceTaint as ResourceTaint
from kubedevice.resource.times import metav1_time

__all__ = [
    "CapacityRange",
    "CapacityRequestPolicy",
    "CounterSet",
    "DeviceCapacity",
    "DeviceCounterConsumption",
    "DeviceTaint",
    "TaintEffect",
]

#: What a taint does to claims that do not tolerate it: NoSchedule keeps new allocations off the device,
#: NoExecute also evicts the pods using it, None only informs.
TaintEffect = Literal["NoSchedule", "NoExecute", "None"]


def refuse(what: str, errors: Sequence[FieldError]) -> None:
    """Raise ValueError naming `what` and each refusal, when there is any."""
    if errors:
        raise ValueError(f"{what}: " + "; ".join(str(e) for e in errors))


@dataclass(frozen=True)
class DeviceTaint:
    """A taint on a device: its `effect` on every claim that does not tolerate it.

    `key` is a label key (`kubedevice.io/unhealthy`), `value` a label value. `time_added` is when the taint
    appeared; leave it None and the SDK stamps the time it first publishes the taint, keeping that time
    for as long as the same taint (key, value, effect) stays on the device.
    """

    key: str
    effect: TaintEffect
    value: str = ""
    time_added: datetime | None = None

    def __post_init__(self) -> None:
        if self.time_added is not None and self.time_added.tzinfo is None:
            raise ValueError(f"taint {self.text()}: time_added must carry a time zone (datetime.now(UTC))")
        refuse(f"taint {self.text()}", validate_taint(self.to_json(), "taint"))

    @property
    def identity(self) -> tuple[str, str, str]:
        """What makes two taints the same taint, whatever their times."""
        return (self.key, self.value, self.effect)

    def text(self) -> str:
        """`key=value:Effect`, as kubectl shows a taint (`key:Effect` without a value)."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    def to_json(self) -> dict[str, Any]:
        """The taint as resource.k8s.io/v1 writes it."""
        added = metav1_time(self.time_added) if self.time_added is not None else None
        return ResourceTaint(self.key, self.effect, self.value, added).to_json()


def _counters_json(counters: Mapping[str, str]) -> dict[str, Any]:
    return {name: {"value": quantity} for name, quantity in sorted(counters.items())}


@dataclass(frozen=True)
class CounterSet:
    """Counters a pool offers (a GPU's memory and compute slices): devices consume from them while they
    are allocated, so two devices that need more than the set holds are never allocated together.

    `name` is a DNS label, unique in the driver's pool; `counters` maps DNS-label names to quantities.
    """

    name: str
    counters: Mapping[str, str] = field(hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counters", dict(self.counters))
        refuse(f"counter set {self.name}", validate_counter_set(self.to_json(), "counterSet"))

    def to_json(self) -> dict[str, Any]:
        """The counter set as resource.k8s.io/v1 writes it."""
        return {"name": self.name, "counters": _counters_json(self.counters)}


@dataclass(frozen=True)
class DeviceCounterConsumption:
    """What a device uses up of one counter set (`counter_set`, by name) while it is allocated."""

    counter_set: str
    #: Counter name -> the quantity the device uses of it; each counter must be one of the set's.
    counters: Mapping[str, str] = field(hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counters", dict(self.counters))
        refuse(
            f"consumption of counter set {self.counter_set}",
            validate_consumption(self.to_json(), "consumesCounters"),
        )

    def to_json(self) -> dict[str, Any]:
        """The consumption as resource.k8s.io/v1 writes it."""
        return {"counterSet": self.counter_set, "counters": _counters_json(self.counters)}


@dataclass(frozen=True)
class CapacityRange:
    """A request policy's valid range: a request under `min` is rounded up to it, one between steps up to
    the next `min + n * step`; one over `max` cannot be served."""

    min: str
    max: str | None = None
    #: The size of the steps from `min`; None: any amount in the range.
    step: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The range as resource.k8s.io/v1 writes it."""
        out = {"min": self.min}
        out.update({k: v for k, v in (("max", self.max), ("step", self.step)) if v is not None})
        return out


@dataclass(frozen=True)
class CapacityRequestPolicy:
    """How one allocation of a shared device consumes a capacity: `default` when the request names no
    amount, and which amounts are valid (`valid_values`, ascending, or `valid_range`; at most one)."""

    default: str | None = None
    valid_values: Sequence[str] = ()
    valid_range: CapacityRange | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "valid_values", tuple(self.valid_values))

    def to_json(self) -> dict[str, Any]:
        """The policy as resource.k8s.io/v1 writes it."""
        out: dict[str, Any] = {}
        if self.default is not None:
            out["default"] = self.default
        if self.valid_values:
            out["validValues"] = list(self.valid_values)
        if self.valid_range is not None:
            out["validRange"] = self.valid_range.to_json()
        return out


@dataclass(frozen=True)
class DeviceCapacity:
    """A capacity with a request policy, for a device with `allow_multiple_allocations`; a plain capacity
    is just its quantity string in `Device.capacity`."""

    #: The device's whole capacity (a quantity).
    value: str
    #: How one allocation consumes it; None: any amount up to what is left.
    request_policy: CapacityRequestPolicy | None = None

    def __post_init__(self) -> None:
        refuse(f"capacity {self.value}", validate_capacity({"capacity": self.to_json()}, True, "capacity"))

    def to_json(self) -> dict[str, Any]:
        """The capacity as resource.k8s.io/v1 writes it."""
        out: dict[str, Any] = {"value": self.value}
        if self.request_policy is not None:
            out["requestPolicy"] = self.request_policy.to_json()
        return out
