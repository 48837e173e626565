"""How the API server validates the fields of one ResourceSlice device and of a counter set
(pkg/apis/resource/validation: validateDeviceAttribute, validateQualifiedName,
validateDeviceTaint, validateCounterSet, validateDeviceCounterConsumption, validateDeviceBindingParameters),
rule for rule, on the JSON as it is sent; each refusal in its words, with its field path.

slice_rules.py puts them together for a whole slice and a pool; capacity_rules.py checks a capacity's
request policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from kubedevice.resource.device_status_rules import driver_name_errors
from kubedevice.resource.field_errors import FieldError, path
from kubedevice.resource.names import QUALIFIED_NAME, dns_label_errors, qualified_name_errors
from kubedevice.resource.quantity import parse_quantity

__all__ = [
    "MAX_ATTRIBUTES_AND_CAPACITIES",
    "MAX_BINDING_CONDITIONS",
    "MAX_CONSUMPTIONS",
    "MAX_COUNTERS",
    "MAX_TAINTS",
    "TAINT_EFFECTS",
    "as_list",
    "as_mapping",
    "key_path",
    "label_name_errors",
    "qualified_name_field_errors",
    "quantity_of",
    "validate_attributes",
    "validate_binding_conditions",
    "validate_consumption",
    "validate_counter_set",
    "validate_set",
    "validate_taint",
]

#: resource/v1's limits: attributes and capacities of a device together, taints of a device, binding
#: (failure) conditions of a device, counter consumptions of a device, counters of a set or consumption,
#: validValues of a request policy.
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_TAINTS = 16
MAX_BINDING_CONDITIONS = 4
MAX_CONSUMPTIONS = 2
MAX_COUNTERS = 32
_MAX_ATTRIBUTE_VALUE = 64
_MAX_IDENTIFIER = 32
#: The effects a taint may have, sorted as the API server lists them in a refusal.
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_C_IDENTIFIER_TEXT = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
_LABEL_VALUE_TEXT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    f"for validation is '({QUALIFIED_NAME.pattern})?')"
)
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?"
)
_ATTRIBUTE_KINDS = ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")


def key_path(where: str, key: str) -> str:
    """`field.Path.Key`: `capacity[memory]`."""
    return f"{where}[{key}]"


def as_mapping(value: Any, where: str, errors: list[FieldError]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.append(FieldError.invalid(where, type(value).__name__, "must be an object"))
        return {}
    return value


def as_list(value: Any, where: str, errors: list[FieldError]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(FieldError.invalid(where, type(value).__name__, "must be a list"))
        return []
    return value


def quantity_of(value: Any, where: str, errors: list[FieldError]) -> Decimal | None:
    """A quantity as sent (a string, or a number in YAML); its refusal is the decoder's."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    try:
        if text is not None:
            return parse_quantity(text)
    except ValueError as err:
        errors.append(FieldError.invalid(where, text, str(err)))
        return None
    errors.append(FieldError.invalid(where, repr(value), "must be a quantity such as 16Gi, 2 or 500m"))
    return None


def label_name_errors(value: Any, where: str) -> list[FieldError]:
    """metav1validation.ValidateLabelName: a qualified name."""
    if not isinstance(value, str):
        return [FieldError.invalid(where, repr(value), "must be a string")]
    return [FieldError.invalid(where, value, m) for m in qualified_name_errors(value)]


def _label_value(value: str, where: str) -> list[FieldError]:
    errors = []
    if len(value) > 63:
        errors.append(FieldError.invalid(where, value, "must be no more than 63 characters"))
    if value and QUALIFIED_NAME.fullmatch(value) is None:
        errors.append(FieldError.invalid(where, value, _LABEL_VALUE_TEXT))
    return errors


def qualified_name_field_errors(name: str, where: str) -> list[FieldError]:
    """validateQualifiedName: a C identifier of at most 32 characters, optionally `<driver name>/` first."""
    parts = name.split("/")
    if len(parts) > 2:
        return [FieldError.invalid(where, name, "must not contain more than one slash")]
    errors: list[FieldError] = []
    if len(parts) == 2:
        if not parts[0]:
            errors.append(FieldError.invalid(where, "", "the domain must not be empty"))
        else:
            errors += driver_name_errors(parts[0], where)
        if not parts[1]:
            errors.append(FieldError.invalid(where, "", "the name must not be empty"))
            return errors
    identifier = parts[-1]
    if len(identifier) > _MAX_IDENTIFIER:
        errors.append(FieldError.too_long(where, _MAX_IDENTIFIER))
    if _C_IDENTIFIER.fullmatch(identifier) is None:
        errors.append(FieldError.invalid(where, identifier, _C_IDENTIFIER_TEXT))
    return errors


def validate_attributes(attributes: Any, where: str) -> list[FieldError]:
    """A device's `attributes`: qualified names, each value exactly one of its kinds, strings and versions
    of at most 64 characters, versions semantic."""
    errors: list[FieldError] = []
    for name, raw in sorted(as_mapping(attributes, where, errors).items()):
        errors += qualified_name_field_errors(name, where)
        at = key_path(where, name)
        value = as_mapping(raw, at, errors)
        kinds = [k for k in _ATTRIBUTE_KINDS if k in value]
        if len(kinds) != 1:
            errors.append(FieldError.invalid(at, "", "exactly one value must be specified"))
            continue
        kind = kinds[0]
        items = value[kind] if kind.endswith("s") else [value[kind]]
        for text in (i for i in items if kind in ("string", "version", "strings", "versions")):
            item_at = path(at, kind)
            if kind in ("version", "versions") and (not isinstance(text, str) or not _SEMVER.fullmatch(text)):
                errors.append(
                    FieldError.invalid(
                        item_at, str(text), "must be a string compatible with semver.org spec 2.0.0"
                    )
                )
            if isinstance(text, str) and len(text.encode()) > _MAX_ATTRIBUTE_VALUE:
                errors.append(FieldError.too_long(item_at, _MAX_ATTRIBUTE_VALUE))
    return errors


def validate_taint(raw: Any, where: str) -> list[FieldError]:
    """validateDeviceTaint: the key a label name, the value a label value, the effect one of the three; a
    `timeAdded` must be a time."""
    errors: list[FieldError] = []
    taint = as_mapping(raw, where, errors)
    errors += label_name_errors(taint.get("key", ""), path(where, "key"))
    value = taint.get("value", "")
    if not isinstance(value, str):
        errors.append(FieldError.invalid(path(where, "value"), repr(value), "must be a string"))
    elif value:
        errors += _label_value(value, path(where, "value"))
    effect = taint.get("effect", "")
    if effect == "":
        errors.append(FieldError.required(path(where, "effect")))
    elif effect not in TAINT_EFFECTS:
        errors.append(FieldError.not_supported(path(where, "effect"), str(effect), TAINT_EFFECTS))
    added = taint.get("timeAdded")
    if added is not None and not _is_time(added):
        errors.append(FieldError.invalid(path(where, "timeAdded"), str(added), "must be an RFC 3339 time"))
    return errors


def _is_time(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _counters(raw: Any, where: str) -> list[FieldError]:
    """A counter map: required, at most 32 entries, DNS-label names, quantities."""
    errors: list[FieldError] = []
    counters = as_mapping(raw, where, errors)
    if not counters:
        return [*errors, FieldError.required(where)]
    if len(counters) > MAX_COUNTERS:
        return [*errors, FieldError.too_many(where, len(counters), MAX_COUNTERS)]
    for name, entry in sorted(counters.items()):
        errors += [FieldError.invalid(where, name, m) for m in dns_label_errors(name)]
        at = key_path(where, name)
        quantity_of(as_mapping(entry, at, errors).get("value"), path(at, "value"), errors)
    return errors


def _short_name(value: Any, where: str) -> list[FieldError]:
    if not value:
        return [FieldError.required(where)]
    if not isinstance(value, str):
        return [FieldError.invalid(where, repr(value), "must be a string")]
    return [FieldError.invalid(where, value, m) for m in dns_label_errors(value)]


def _named_counters(raw: Any, where: str, name_field: str) -> list[FieldError]:
    errors: list[FieldError] = []
    value = as_mapping(raw, where, errors)
    errors += _short_name(value.get(name_field), path(where, name_field))
    return errors + _counters(value.get("counters"), path(where, "counters"))


def validate_counter_set(raw: Any, where: str) -> list[FieldError]:
    """validateCounterSet: a DNS-label name and its counters."""
    return _named_counters(raw, where, "name")


def validate_consumption(raw: Any, where: str) -> list[FieldError]:
    """validateDeviceCounterConsumption: the counter set named (a DNS label) and the counters used."""
    return _named_counters(raw, where, "counterSet")


def validate_set(
    raw: Any,
    where: str,
    limit: int,
    item: Callable[[Any, str], list[FieldError]],
    key: Callable[[Any], Any],
) -> list[FieldError]:
    """validateSet: at most `limit` items (more is one error, nothing else checked), each valid, no key
    twice."""
    errors: list[FieldError] = []
    items = as_list(raw, where, errors)
    if len(items) > limit:
        return [*errors, FieldError.too_many(where, len(items), limit)]
    seen: set[Any] = set()
    for i, value in enumerate(items):
        errors += item(value, path(where, i))
    for i, value in enumerate(items):
        k = key(value) if isinstance(value, Mapping) else None
        if k is None:
            continue
        if k in seen:
            errors.append(FieldError.duplicate(path(where, i), str(k)))
        seen.add(k)
    return errors


def validate_binding_conditions(conditions: Any, failures: Any, where: str) -> list[FieldError]:
    """validateDeviceBindingParameters: at most 4 of each, label names, no repeats, none in both lists,
    and neither list without the other."""
    errors: list[FieldError] = []
    lists: list[Sequence[Any]] = []
    for name, raw in (("bindingConditions", conditions), ("bindingFailureConditions", failures)):
        at = path(where, name)
        items = as_list(raw, at, errors)
        lists.append(items)
        if len(items) > MAX_BINDING_CONDITIONS:
            errors.append(FieldError.too_many(at, len(items), MAX_BINDING_CONDITIONS))
            continue
        for i, value in enumerate(items):
            errors += label_name_errors(value, path(at, i))
    ready, failed = lists
    for name, given in (("bindingConditions", ready), ("bindingFailureConditions", failed)):
        seen: set[Any] = set()
        for i, value in enumerate(given):
            if value in seen:
                errors.append(FieldError.duplicate(path(where, name, i), str(value)))
            seen.add(value)
            if name == "bindingFailureConditions" and value in ready:
                errors.append(
                    FieldError.invalid(
                        path(where, name, i),
                        str(value),
                        "bindingFailureConditions must not overlap with bindingConditions",
                    )
                )
    if failed and not ready:
        errors.append(
            FieldError.invalid(
                path(where, "bindingConditions"),
                None,
                "bindingConditions are required to use bindingFailureConditions",
            )
        )
    if ready and not failed:
        errors.append(
            FieldError.invalid(
                path(where, "bindingFailureConditions"),
                None,
                "bindingFailureConditions are required to use bindingConditions",
            )
        )
    return errors
