"""How the API server validates a device's `capacity` and its `requestPolicy` (pkg/apis/resource/validation:
validateMultiAllocatableDeviceCapacity, validateSingleAllocatableDeviceCapacity, validateRequestPolicy,
validateRequestPolicyValidValues, validateRequestPolicyRange), rule for rule, in its words.

Quantities are compared exactly: upstream compares a range's steps with 64-bit integers (Quantity.Value())
unless its fractional-range gate is on, which differs only for fractional quantities.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubedevice.resource.device_rules import (
    as_list,
    as_mapping,
    key_path,
    qualified_name_field_errors,
    quantity_of,
)
from kubedevice.resource.field_errors import FieldError, path

__all__ = ["MAX_VALID_VALUES", "validate_capacity"]

#: CapacityRequestPolicyDiscreteMaxOptions: the most validValues a request policy may list.
MAX_VALID_VALUES = 10


def validate_capacity(capacity: Any, allow_multiple: bool, where: str) -> list[FieldError]:
    """A device's `capacity`: qualified names, quantities, and a `requestPolicy` only on a device with
    `allowMultipleAllocations` (validateMultiAllocatableDeviceCapacity / ...SingleAllocatable...)."""
    errors: list[FieldError] = []
    for name, raw in sorted(as_mapping(capacity, where, errors).items()):
        errors += qualified_name_field_errors(name, where)
        at = key_path(where, name)
        entry = as_mapping(raw, at, errors)
        value = quantity_of(entry.get("value"), path(at, "value"), errors)
        policy = entry.get("requestPolicy")
        if policy is None:
            continue
        if not allow_multiple:
            errors.append(
                FieldError.forbidden(path(at, "requestPolicy"), "allowMultipleAllocations must be true")
            )
        elif value is not None:
            errors += _request_policy(value, policy, path(at, "requestPolicy"))
    return errors


def _request_policy(capacity: Decimal, raw: Any, where: str) -> list[FieldError]:
    errors: list[FieldError] = []
    policy = as_mapping(raw, where, errors)
    values, valid_range = (
        as_list(policy.get("validValues"), path(where, "validValues"), errors),
        policy.get("validRange"),
    )
    if values and valid_range is not None:
        return [
            *errors,
            FieldError.forbidden(
                where,
                'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the '
                "same time",
            ),
        ]
    if not values and valid_range is None:
        return errors
    default = policy.get("default")
    if default is None:
        what = "validValues" if values else "validRange"
        return [*errors, FieldError.required(path(where, "default"), f"required when {what} is defined")]
    default_value = quantity_of(default, path(where, "default"), errors)
    if default_value is None:
        return errors
    if values:
        return errors + _valid_values(
            default_value, str(default), capacity, values, path(where, "validValues")
        )
    return errors + _valid_range(
        default_value, str(default), capacity, valid_range, path(where, "validRange")
    )


def _valid_values(
    default: Decimal, default_text: str, capacity: Decimal, values: list[Any], where: str
) -> list[FieldError]:
    errors: list[FieldError] = []
    parsed = [quantity_of(v, path(where, i), errors) for i, v in enumerate(values)]
    for i in range(len(parsed) - 1):
        a, b = parsed[i], parsed[i + 1]
        if a is not None and b is not None and a > b:
            errors.append(
                FieldError.invalid(
                    path(where, i + 1), str(values[i + 1]), "values must be sorted in ascending order"
                )
            )
    if len(values) > MAX_VALID_VALUES:
        return [*errors, FieldError.too_many(where, len(values), MAX_VALID_VALUES)]
    seen: set[Decimal] = set()
    for i, value in enumerate(parsed):
        if value is None:
            continue
        if value > capacity:
            errors.append(
                FieldError.invalid(
                    path(where, i), str(values[i]), f"option is larger than capacity value: {capacity}"
                )
            )
        if value in seen:
            errors.append(FieldError.duplicate(path(where, i), str(values[i])))
        seen.add(value)
    if default not in seen:
        errors.append(
            FieldError.invalid(
                where, default_text, "default value is not valid according to the requestPolicy"
            )
        )
    return errors


def _valid_range(
    default: Decimal, default_text: str, capacity: Decimal, raw: Any, where: str
) -> list[FieldError]:
    errors: list[FieldError] = []
    valid_range = as_mapping(raw, where, errors)
    if valid_range.get("min") is None:
        return [*errors, FieldError.required(path(where, "min"), "required when validRange is defined")]
    low = quantity_of(valid_range["min"], path(where, "min"), errors)
    high = (
        None
        if valid_range.get("max") is None
        else quantity_of(valid_range["max"], path(where, "max"), errors)
    )
    step = (
        None
        if valid_range.get("step") is None
        else quantity_of(valid_range["step"], path(where, "step"), errors)
    )
    if low is None:
        return errors
    low_text = str(valid_range["min"])
    if low > capacity:
        errors.append(
            FieldError.invalid(path(where, "min"), low_text, f"min is larger than capacity value: {capacity}")
        )
    if default < low:
        errors.append(
            FieldError.invalid(path(where, "default"), default_text, f"default is less than min: {low_text}")
        )
    if high is not None:
        high_text = str(valid_range["max"])
        if low > high:
            errors.append(
                FieldError.invalid(path(where, "max"), low_text, f"min is larger than max: {high_text}")
            )
        if high > capacity:
            errors.append(
                FieldError.invalid(
                    path(where, "max"), high_text, f"max is larger than capacity value: {capacity}"
                )
            )
        if default > high:
            errors.append(
                FieldError.invalid(
                    path(where, "default"), default_text, f"default is more than max: {high_text}"
                )
            )
    if step is None:
        return errors
    step_text, step_at = str(valid_range["step"]), path(where, "step")
    if step <= 0:
        return [*errors, FieldError.invalid(step_at, step_text, "must be greater than zero")]
    if low + step > capacity:
        errors.append(
            FieldError.invalid(
                step_at, step_text, f"one step {low + step} is larger than capacity value: {capacity}"
            )
        )
    for value, text in ((default, default_text), (high, str(valid_range.get("max")))):
        if value is not None and (value - low) % step != 0:
            errors.append(
                FieldError.invalid(
                    step_at, text, f"value is not a multiple of a given step ({step_text}) from ({low_text})"
                )
            )
    return errors
