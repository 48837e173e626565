"""Reading consumable capacity (resource/capacity.py) from documents, checked as the API server checks it
(`validateRequestPolicy` and the fields around it); the first refusal is reported, with its field path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubedevice.resource.capacity import (
    MAX_VALID_VALUES,
    CapacityRange,
    CapacityRequestPolicy,
    CapacityRequirements,
    ConsumedCapacity,
    DeviceCapacity,
)
from kubedevice.resource.fields import Fields, is_qualified_attribute
from kubedevice.resource.quantity import Quantity

__all__ = ["read_capacity_requirements", "read_consumed_capacity", "read_device_capacity"]

_INT64_MAX = 2**63 - 1


def read_device_capacity(f: Fields, raw: Any, path: str, multiple_allocations: bool) -> DeviceCapacity:
    """One `capacity[<name>]` entry of a device; `multiple_allocations` is the device's
    `allowMultipleAllocations` (without it a `requestPolicy` is refused, as the API server does)."""
    entry = f.mapping(raw, path)
    value = _quantity(f, entry.get("value"), f"{path}.value")
    raw_policy = entry.get("requestPolicy")
    if raw_policy is None:
        return DeviceCapacity(value)
    at = f"{path}.requestPolicy"
    if not multiple_allocations:
        raise f.error(at, "is allowed only when the device has allowMultipleAllocations: true")
    policy = f.mapping(raw_policy, at)
    default = None if policy.get("default") is None else _quantity(f, policy["default"], f"{at}.default")
    values = tuple(
        _quantity(f, v, f"{at}.validValues[{i}]")
        for i, v in enumerate(
            f.items(policy.get("validValues"), f"{at}.validValues", at_most=MAX_VALID_VALUES)
        )
    )
    raw_range = policy.get("validRange")
    if values and raw_range is not None:
        raise f.error(
            at, 'exactly one policy can be specified, cannot specify "validValues" and "validRange"'
        )
    valid_range = None
    if values:
        _check_valid_values(f, value, default, values, f"{at}.validValues")
    elif raw_range is not None:
        valid_range = _read_range(f, value, default, f.mapping(raw_range, f"{at}.validRange"), at)
    return DeviceCapacity(value, CapacityRequestPolicy(default, values, valid_range))


def _check_valid_values(
    f: Fields, capacity: Quantity, default: Quantity | None, values: tuple[Quantity, ...], path: str
) -> None:
    """`validateRequestPolicyValidValues`, in its order."""
    if default is None:
        raise f.error(path.rpartition(".")[0] + ".default", "is required when validValues is defined")
    for i in range(1, len(values)):
        if values[i - 1] > values[i]:
            raise f.error(f"{path}[{i}]", f"{values[i]}: values must be sorted in ascending order")
    for i, option in enumerate(values):
        if option > capacity:
            raise f.error(f"{path}[{i}]", f"{option}: option is larger than capacity value: {capacity}")
    seen: set[int] = set()
    for i, option in enumerate(values):
        # Duplicates by Value(), as the API server keys them (without DRAFractionalCapacityRange).
        if option.ceil() in seen:
            raise f.error(f"{path}[{i}]", f"duplicate value {option.ceil()}")
        seen.add(option.ceil())
    if default not in values:
        raise f.error(path, f"default value {default} is not valid according to the requestPolicy")


def _read_range(
    f: Fields, capacity: Quantity, default: Quantity | None, raw: Mapping[str, Any], policy_path: str
) -> CapacityRange:
    """`validateRequestPolicyRange`, in its order (the first refusal is the one reported)."""
    at = f"{policy_path}.validRange"
    if default is None:
        raise f.error(f"{policy_path}.default", "is required when validRange is defined")
    if raw.get("min") is None:
        raise f.error(f"{at}.min", "is required when validRange is defined")
    low = _quantity(f, raw["min"], f"{at}.min")
    high = None if raw.get("max") is None else _quantity(f, raw["max"], f"{at}.max")
    step = None if raw.get("step") is None else _quantity(f, raw["step"], f"{at}.step")
    if low > capacity:
        raise f.error(f"{at}.min", f"{low}: min is larger than capacity value: {capacity}")
    if default < low:
        raise f.error(f"{policy_path}.default", f"{default}: default is less than min: {low}")
    if high is not None:
        if low > high:
            raise f.error(f"{at}.min", f"{low}: min is larger than max: {high}")
        if high > capacity:
            raise f.error(f"{at}.max", f"{high}: max is larger than capacity value: {capacity}")
        if default > high:
            raise f.error(f"{policy_path}.default", f"{default}: default is more than max: {high}")
    if step is not None:
        if step <= Quantity.of(0):
            raise f.error(f"{at}.step", f"{step}: must be greater than zero")
        if low + step > capacity:
            raise f.error(
                f"{at}.step", f"{step}: one step {low + step} is larger than capacity value: {capacity}"
            )
        # The step arithmetic reads Value(), an int64: every bound must be one, and not negative.
        bounds = (
            (default, f"{policy_path}.default"),
            (low, f"{at}.min"),
            (high, f"{at}.max"),
            (step, f"{at}.step"),
        )
        for bound, where in bounds:
            if bound is not None and bound < Quantity.of(0):
                raise f.error(where, f"{bound}: must be greater than or equal to 0")
            if bound is not None and bound > Quantity.of(_INT64_MAX):
                raise f.error(where, f"{bound}: must not be larger than {_INT64_MAX}")
        for bound in (default, high):
            if bound is not None and (bound.ceil() - low.ceil()) % step.ceil():
                raise f.error(
                    f"{at}.step", f"{bound}: value is not a multiple of a given step ({step}) from ({low})"
                )
    return CapacityRange(low, high, step)


def read_capacity_requirements(f: Fields, raw: Any, path: str) -> CapacityRequirements:
    """A request's `capacity`: `requests` maps capacity names to amounts that are not negative."""
    entry = f.mapping(raw, path)
    requests: dict[str, Quantity] = {}
    for name, value in _named(f, entry.get("requests"), f"{path}.requests").items():
        amount = _quantity(f, value, f"{path}.requests[{name}]")
        if amount < Quantity.of(0):
            raise f.error(f"{path}.requests[{name}]", f"{amount}: must not be negative")
        requests[name] = amount
    return CapacityRequirements(requests)


def read_consumed_capacity(f: Fields, raw: Any, path: str) -> ConsumedCapacity | None:
    """A result's `consumedCapacity` (None when absent)."""
    if raw is None:
        return None
    return {name: _quantity(f, value, f"{path}[{name}]") for name, value in _named(f, raw, path).items()}


def _named(f: Fields, value: Any, path: str) -> Mapping[str, Any]:
    out = f.mapping(value, path)
    for key in out:
        if not isinstance(key, str) or not is_qualified_attribute(key, domain_required=False):
            raise f.error(f"{path}[{key}]", "is not a capacity name (<identifier> or <domain>/<identifier>)")
    return out


def _quantity(f: Fields, value: Any, path: str) -> Quantity:
    try:
        return Quantity.read(value)
    except ValueError as err:
        raise f.error(path, str(err)) from None
