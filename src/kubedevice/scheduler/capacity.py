"""Consumable capacity in the search (KEP-5075; upstream's `consumable_capacity.go`): what one allocation of a
device consumes of each of its capacities, whether the device can still hold it, and the running totals of
what the search is allocating.

Every device is checked (`CmpRequestOverCapacity`), not only those with allowMultipleAllocations: a request
may name a capacity the device lacks, or ask more than it has. Only a device with allowMultipleAllocations
stays a candidate once taken; each allocation of it consumes its share, and the shares (those of allocated
claims plus those of this search) may not exceed any capacity's value. The arithmetic is exact; where
upstream reads `Quantity.Value()` (the step of a `validRange`) so does this, rounded up to an integer.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubedevice.resource.capacity import (
    CapacityRange,
    CapacityRequestPolicy,
    ConsumedCapacity,
    DeviceCapacity,
)
from kubedevice.resource.model import DeviceID
from kubedevice.resource.quantity import Quantity

__all__ = [
    "AllocatingCapacity",
    "capacity_fits",
    "consumed_capacity",
    "consumed_from_request",
    "violates_policy",
]

_NOTHING: Mapping[str, Quantity] = {}


def capacity_fits(
    allocated: ConsumedCapacity | None,
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocating: ConsumedCapacity | None,
) -> bool:
    """`CmpRequestOverCapacity`: the request names only capacities the device has, what it consumes of each
    satisfies the capacity's requestPolicy, and that plus what is `allocated` (claims already allocated)
    and `allocating` (this search) fits in the capacity's value."""
    requests = requests or _NOTHING
    if any(name not in capacity for name in requests):
        return False
    allocated = allocated or _NOTHING
    allocating = allocating or _NOTHING
    for name, entry in capacity.items():
        consumed = consumed_from_request(requests.get(name), entry)
        if violates_policy(consumed, entry.request_policy):
            return False
        total = consumed
        if name in allocated:
            total = total + allocated[name]
        if name in allocating:
            total = total + allocating[name]
        if total > entry.value:
            return False
    return True


def consumed_capacity(
    requests: Mapping[str, Quantity] | None, capacity: Mapping[str, DeviceCapacity]
) -> dict[str, Quantity]:
    """`GetConsumedCapacityFromRequest`: what one allocation consumes of each of the device's capacities."""
    requests = requests or _NOTHING
    return {name: consumed_from_request(requests.get(name), entry) for name, entry in capacity.items()}


def consumed_from_request(requested: Quantity | None, capacity: DeviceCapacity) -> Quantity:
    """`calculateConsumedCapacity`: no request consumes the policy's default (the whole value without
    one); a request is rounded up to the policy's range (`min`, then `min + n*step`) or to its next valid
    value, and is taken as it is beyond the last."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None:
        return _round_up_range(requested, policy.valid_range)
    for value in policy.valid_values:
        if requested <= value:
            return value
    return requested


def _round_up_range(requested: Quantity, valid: CapacityRange) -> Quantity:
    if requested < valid.min:
        return valid.min
    if valid.step is None:
        return requested
    low, step = valid.min.ceil(), valid.step.ceil()
    steps, rest = divmod(requested.ceil() - low, step)
    # resource.NewQuantity(min + step*n, resource.BinarySI), as upstream makes it
    return Quantity.of(low + step * (steps + (1 if rest else 0)), "BinarySI")


def violates_policy(consumed: Quantity, policy: CapacityRequestPolicy | None) -> bool:
    """`violatesPolicy`: over the range's `max`, off its steps, or not one of the valid values (the
    policy's default is always valid)."""
    if policy is None or consumed == policy.default:
        return False
    valid = policy.valid_range
    if valid is not None:
        if valid.max is not None and consumed > valid.max:
            return True
        return valid.step is not None and (consumed.ceil() - valid.min.ceil()) % valid.step.ceil() != 0
    return bool(policy.valid_values) and consumed not in policy.valid_values


class AllocatingCapacity:
    """What the search is allocating of each shared device, summed (upstream's `allocatingCapacity`):
    added when a device is taken, taken off when it is given back, never recomputed. A device's entry
    goes when every amount in it is back to zero, as upstream's does."""

    def __init__(self) -> None:
        self._totals: dict[DeviceID, dict[str, Quantity]] = {}

    def get(self, device: DeviceID) -> ConsumedCapacity | None:
        return self._totals.get(device)

    def __contains__(self, device: DeviceID) -> bool:
        return device in self._totals

    def insert(self, device: DeviceID, consumed: ConsumedCapacity) -> None:
        totals = self._totals.setdefault(device, {})
        for name, amount in consumed.items():
            totals[name] = totals[name] + amount if name in totals else amount

    def remove(self, device: DeviceID, consumed: ConsumedCapacity) -> None:
        totals = self._totals.get(device)
        if totals is None:
            return
        for name, amount in consumed.items():
            if name in totals:
                totals[name] = totals[name] - amount
        if not any(totals.values()):
            del self._totals[device]
