"""How the API server validates a ResourceSlice's spec (pkg/apis/resource/validation:
validateResourceSliceSpec, validateDevice), and what upstream's resourceslice controller checks across the
slices of one pool (resourceslice/validation.go: validatePool), rule for rule, on the JSON as it is sent.

For writers of slices: the SDK refuses content before publishing it, the conformance checker holds a
driver's slice file to it, tests hold what the SDK publishes to it. Readers read slices with
slice_document.py, which also takes what older API versions allowed (counter sets beside devices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubedevice.resource.capacity_rules import validate_capacity
from kubedevice.resource.device_rules import (
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_CONSUMPTIONS,
    MAX_TAINTS,
    validate_attributes,
    validate_binding_conditions,
    validate_consumption,
    validate_counter_set,
    validate_set,
    validate_taint,
)
from kubedevice.resource.device_status_rules import driver_name_errors, pool_name_errors
from kubedevice.resource.field_errors import FieldError, path
from kubedevice.resource.names import dns_label_errors, dns_subdomain_errors
from kubedevice.wording import go_quote

__all__ = [
    "MAX_COUNTER_SETS",
    "MAX_DEVICES",
    "MAX_DEVICES_WITH_TAINTS_OR_COUNTERS",
    "uses_taints_or_counters",
    "validate_device",
    "validate_pool",
    "validate_slice_spec",
]

#: resource/v1's ResourceSliceMaxDevices, ResourceSliceMaxDevicesWithAdvancedFeatures (a device of the
#: slice has taints or consumes counters) and ResourceSliceMaxCounterSets.
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS_OR_COUNTERS = 64
MAX_COUNTER_SETS = 8
_NODE_SELECTION = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")


def uses_taints_or_counters(device: Mapping[str, Any]) -> bool:
    """haveDeviceTaints / haveConsumesCounters for one device: what lowers its slice's limit to 64."""
    return bool(device.get("taints")) or bool(device.get("consumesCounters"))


def validate_slice_spec(spec: Any, where: str = "spec") -> list[FieldError]:
    """Every refusal of a ResourceSlice's `spec`; empty when the API server takes it."""
    if not isinstance(spec, Mapping):
        return [FieldError.required(where)]
    errors = driver_name_errors(str(spec.get("driver") or ""), path(where, "driver"))
    errors += _pool(spec.get("pool"), path(where, "pool"))
    errors += _node_selection(spec, where)
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errors.append(FieldError.invalid(where, "", "only one of `sharedCounters` or `devices` is allowed"))
    devices = spec.get("devices")
    per_device = spec.get("perDeviceNodeSelection") is True
    limit = MAX_DEVICES
    if isinstance(devices, list) and any(
        isinstance(d, Mapping) and uses_taints_or_counters(d) for d in devices
    ):
        limit = MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
    errors += validate_set(
        devices,
        path(where, "devices"),
        limit,
        lambda device, at: validate_device(device, at, per_device),
        lambda device: device.get("name"),
    )
    errors += validate_set(
        spec.get("sharedCounters"),
        path(where, "sharedCounters"),
        MAX_COUNTER_SETS,
        validate_counter_set,
        lambda counter_set: counter_set.get("name"),
    )
    return errors


def _pool(raw: Any, where: str) -> list[FieldError]:
    if not isinstance(raw, Mapping):
        return [FieldError.required(where)]
    errors = pool_name_errors(str(raw.get("name") or ""), path(where, "name"))
    count, generation = raw.get("resourceSliceCount"), raw.get("generation")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        errors.append(
            FieldError.invalid(path(where, "resourceSliceCount"), count, "must be greater than zero")
        )
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        errors.append(
            FieldError.invalid(path(where, "generation"), generation, "must be greater than or equal to zero")
        )
    return errors


def _node_selection(spec: Mapping[str, Any], where: str) -> list[FieldError]:
    """Exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection; a node selector of
    exactly one term."""
    errors: list[FieldError] = []
    chosen: list[str] = []
    node_name = spec.get("nodeName")
    if node_name is not None:
        if node_name:
            chosen.append("`nodeName`")
            errors += [
                FieldError.invalid(path(where, "nodeName"), str(node_name), m)
                for m in dns_subdomain_errors(str(node_name))
            ]
        else:
            errors.append(
                FieldError.invalid(
                    path(where, "nodeName"), "", "must be either unset or set to a non-empty string"
                )
            )
    selector = spec.get("nodeSelector")
    if selector is not None:
        chosen.append("`nodeSelector`")
        terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
        if not isinstance(terms, list) or len(terms) != 1:
            errors.append(
                FieldError.invalid(
                    path(where, "nodeSelector", "nodeSelectorTerms"),
                    "",
                    "must have exactly one node selector term",
                )
            )
    for field in ("allNodes", "perDeviceNodeSelection"):
        value = spec.get(field)
        if value is True:
            chosen.append(f"`{field}`")
        elif value is not None:
            errors.append(
                FieldError.invalid(path(where, field), value, "must be either unset or set to true")
            )
    if not chosen:
        errors.append(
            FieldError.required(
                where,
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
            )
        )
    elif len(chosen) > 1:
        errors.append(
            FieldError.invalid(
                where,
                "{" + ", ".join(chosen) + "}",
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
                "required, but multiple fields are set",
            )
        )
    return errors


def validate_device(raw: Any, where: str, per_device_node_selection: bool = False) -> list[FieldError]:
    """validateDevice: one entry of `spec.devices`."""
    if not isinstance(raw, Mapping):
        return [FieldError.invalid(where, type(raw).__name__, "must be an object")]
    name = raw.get("name")
    errors = (
        [FieldError.invalid(path(where, "name"), str(name), m) for m in dns_label_errors(name)]
        if isinstance(name, str)
        else [FieldError.required(path(where, "name"))]
    )
    attributes, capacity = raw.get("attributes"), raw.get("capacity")
    total = sum(len(v) for v in (attributes, capacity) if isinstance(v, Mapping))
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        errors.append(
            FieldError.invalid(
                where,
                total,
                "the total number of attributes and capacities must not exceed "
                f"{MAX_ATTRIBUTES_AND_CAPACITIES}",
            )
        )
    errors += validate_attributes(attributes, path(where, "attributes"))
    errors += validate_capacity(
        capacity, raw.get("allowMultipleAllocations") is True, path(where, "capacity")
    )
    # validateSlice: taints may repeat.
    errors += validate_set(
        raw.get("taints"), path(where, "taints"), MAX_TAINTS, validate_taint, lambda _: None
    )
    errors += validate_set(
        raw.get("consumesCounters"),
        path(where, "consumesCounters"),
        MAX_CONSUMPTIONS,
        validate_consumption,
        lambda consumption: consumption.get("counterSet"),
    )
    errors += _device_node_selection(raw, where, per_device_node_selection)
    errors += validate_binding_conditions(
        raw.get("bindingConditions"), raw.get("bindingFailureConditions"), where
    )
    return errors


def _device_node_selection(device: Mapping[str, Any], where: str, per_device: bool) -> list[FieldError]:
    fields = [f for f in ("nodeName", "nodeSelector", "allNodes") if device.get(f) is not None]
    if not per_device:
        if not fields:
            return []
        return [
            FieldError.invalid(
                where,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is "
                "set to true in the ResourceSlice spec",
            )
        ]
    if len(fields) == 1 and device.get("allNodes") is not False and device.get("nodeName") != "":
        return []
    detail = (
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
    )
    if not fields:
        return [FieldError.required(where, detail)]
    return [FieldError.invalid(where, "{" + ", ".join(f"`{f}`" for f in fields) + "}", detail)]


def validate_pool(pool: str, specs: Sequence[Mapping[str, Any]]) -> list[str]:
    """What validatePool refuses in the slices (specs) of one pool, beyond each slice's own validation: a
    counter set or a device name twice, a device consuming a counter set or counter the pool does not have.
    Upstream stops at the first; every one is listed here."""
    problems: list[str] = []
    counter_sets: dict[str, Mapping[str, Any]] = {}
    for spec in specs:
        for counter_set in spec.get("sharedCounters") or ():
            name = str(counter_set.get("name"))
            if name in counter_sets:
                problems.append(f"found duplicate counter set {go_quote(name)} in pool {go_quote(pool)}")
            counter_sets[name] = counter_set.get("counters") or {}
    devices: set[str] = set()
    for spec in specs:
        for device in spec.get("devices") or ():
            name = str(device.get("name"))
            if name in devices:
                problems.append(f"found duplicate device {go_quote(name)} in pool {go_quote(pool)}")
            devices.add(name)
            for consumption in device.get("consumesCounters") or ():
                set_name = str(consumption.get("counterSet"))
                counters = counter_sets.get(set_name)
                if counters is None:
                    problems.append(
                        f"counter set {go_quote(set_name)} referenced by device {go_quote(name)} not found"
                    )
                    continue
                problems += [
                    f"counter {go_quote(counter)} referenced by device {go_quote(name)} not found in "
                    f"counter set {go_quote(set_name)}"
                    for counter in consumption.get("counters") or {}
                    if counter not in counters
                ]
    return problems
