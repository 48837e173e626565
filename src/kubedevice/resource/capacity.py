"""Consumable capacity (KEP-5075) in the documents: a device's capacities with their `requestPolicy`, a
request's `capacity.requests`, a result's `consumedCapacity`. capacity_reader.py reads them as the API server
checks them.

A device with `allowMultipleAllocations: true` may be allocated to several requests (of one or several
claims) until its capacities are used up; `requestPolicy` says how much one allocation consumes
(scheduler/capacity.py does the arithmetic). The API server refuses a `requestPolicy` on any other device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubedevice.resource.quantity import Quantity

__all__ = [
    "MAX_VALID_VALUES",
    "CapacityRange",
    "CapacityRequestPolicy",
    "CapacityRequirements",
    "ConsumedCapacity",
    "DeviceCapacity",
]

#: The API's limit on `requestPolicy.validValues` (CapacityRequestPolicyDiscreteMaxOptions).
MAX_VALID_VALUES = 10
#: Capacity name -> how much of it one allocation (or all allocations of a device, summed) consumes.
ConsumedCapacity = Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class CapacityRange:
    """`requestPolicy.validRange`: a request under `min` is rounded up to it, one between steps up to the
    next `min + n*step`; one over `max` cannot be served."""

    min: Quantity
    max: Quantity | None = None
    step: Quantity | None = None


@dataclass(frozen=True, slots=True)
class CapacityRequestPolicy:
    """`requestPolicy`: what an allocation that asks nothing consumes (`default`), and which amounts are
    valid (`valid_values`, ascending, or `valid_range`; at most one of them)."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRange | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    """One entry of a device's `capacity`."""

    value: Quantity
    request_policy: CapacityRequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class CapacityRequirements:
    """A request's `capacity`: `requests`, capacity name -> the amount each allocated device must provide."""

    requests: Mapping[str, Quantity] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        if not self.requests:
            return {}
        return {"requests": {name: str(q) for name, q in sorted(self.requests.items())}}
