"""One ResourceSlice document (`resource.k8s.io` v1, v1beta2 or v1beta1) read into the model.

v1beta1 keeps a device's fields under `basic`; v1 and v1beta2 write them on the device. Shared counters
(counter_reader.py), taints (taint_reader.py), per-device node selection and binding conditions are read
and checked as the API server checks them. A slice that uses a feature kubedevice leaves out is read, not
refused: the slice and its devices are marked with the feature, and such a device is never a candidate for
allocation.

Counter sets may share a slice with devices: Kubernetes 1.35+ publishes them in a slice of their own (its
API server refuses both in one), older drivers beside their devices; both are read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubedevice.resource.capacity import DeviceCapacity
from kubedevice.resource.capacity_reader import read_device_capacity
from kubedevice.resource.counter_reader import read_consumption, read_counter_sets
from kubedevice.resource.fields import Fields, is_qualified_attribute, shown
from kubedevice.resource.identity import document_uid
from kubedevice.resource.model import ObjectMeta
from kubedevice.resource.names import is_qualified_name
from kubedevice.resource.node_selector_reader import read_node_selector
from kubedevice.resource.slice_model import LIST_KINDS, AttributeValue, ResourceSliceDocument, SliceDevice
from kubedevice.resource.taint_reader import read_taints

#: The API's limits on one slice's devices (`ResourceSliceMaxDevices`; with taints, counters consumed or
#: list attributes, `ResourceSliceMaxDevicesWithAdvancedFeatures`), on one device's attributes and
#: capacities together, and on a device's binding conditions and binding failure conditions.
MAX_DEVICES = 128
MAX_DEVICES_WITH_ADVANCED_FEATURES = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_BINDING_CONDITIONS = 4
#: Device fields of the features left out, in the order they are looked for.
_DEVICE_FEATURES: tuple[tuple[str, str], ...] = (("nodeAllocatableResources", "node allocatable resources"),)
_SLICE_FEATURES = (
    ("partitionTypeAttribute", "partition type attribute"),
    ("skipNodeOperations", "optional node operations"),
)
_DEVICE_NODE_FIELDS = ("nodeName", "nodeSelector", "allNodes")
_INT64 = (-(2**63), 2**63 - 1)
#: A device attribute's fields, the list ones last.
_ATTRIBUTE_KINDS = ("int", "bool", "string", "version", *LIST_KINDS)
#: The API's limit on one device's attribute values, a list's elements each counting
#: (ResourceSliceMaxAttributeValuesPerDevice).
MAX_ATTRIBUTE_VALUES = 48
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


def parse_slice(doc: Mapping[str, Any], version: str, source: str) -> ResourceSliceDocument:
    """A checked slice; DocumentError (`ResourceSlice <name>: <field path>: ...`) when it cannot be used."""
    f = Fields("ResourceSlice: ")
    metadata = f.mapping(doc.get("metadata"), "metadata")
    raw_name = metadata.get("name")
    f.where = f"ResourceSlice {raw_name}: " if isinstance(raw_name, str) and raw_name else "ResourceSlice: "
    name = f.dns_subdomain(raw_name, "metadata.name")
    meta = ObjectMeta(
        name=name,
        uid=f.string(metadata.get("uid"), "metadata.uid") or document_uid(doc, "", name, source),
        labels=f.string_map(metadata.get("labels"), "metadata.labels"),
        annotations=f.string_map(metadata.get("annotations"), "metadata.annotations"),
        owner_references=f.owner_references(metadata.get("ownerReferences"), "metadata.ownerReferences"),
        source=source,
    )
    spec = f.mapping(doc.get("spec"), "spec")
    driver = f.dns_subdomain(spec.get("driver"), "spec.driver")
    pool = f.mapping(spec.get("pool"), "spec.pool")
    pool_name = f.string(pool.get("name"), "spec.pool.name", required=True)
    generation = f.integer(pool.get("generation"), "spec.pool.generation", 0)
    if generation < 0:
        raise f.error("spec.pool.generation", f"must not be negative, not {generation}")
    count = f.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 0)
    if count < 1:
        raise f.error("spec.pool.resourceSliceCount", f"must be at least 1, not {count}")
    node_name = f.string(spec.get("nodeName"), "spec.nodeName")
    all_nodes = f.boolean(spec.get("allNodes"), "spec.allNodes")
    chosen = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(chosen) != 1:
        raise f.error(
            "spec", "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set"
        )
    unsupported = next((feature for key, feature in _SLICE_FEATURES if spec.get(key)), None)
    per_device = f.boolean(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")
    raw_devices = f.items(spec.get("devices"), "spec.devices", at_most=MAX_DEVICES)
    devices: list[SliceDevice] = []
    for i, raw in enumerate(raw_devices):
        device = _device(f, raw, f"spec.devices[{i}]", version == "v1beta1", unsupported, per_device)
        if any(d.name == device.name for d in devices):
            raise f.error(f"spec.devices[{i}].name", f"{device.name!r} is used by another device")
        devices.append(device)
    if len(devices) > MAX_DEVICES_WITH_ADVANCED_FEATURES and any(
        d.taints or d.consumes_counters or any(a.kind in LIST_KINDS for a in d.attributes.values())
        for d in devices
    ):
        raise f.error(
            "spec.devices",
            f"must have at most {MAX_DEVICES_WITH_ADVANCED_FEATURES} items when a device has taints, "
            f"consumes counters or has list attributes, has {len(devices)}",
        )
    return ResourceSliceDocument(
        meta=meta,
        driver=driver,
        node_name=node_name,
        all_nodes=all_nodes,
        pool=pool_name,
        generation=generation,
        slice_count=count,
        devices=tuple(devices),
        unsupported=unsupported,
        node_selector=(
            None
            if spec.get("nodeSelector") is None
            else read_node_selector(f, spec.get("nodeSelector"), "spec.nodeSelector")
        ),
        per_device_node_selection=per_device,
        shared_counters=read_counter_sets(f, spec.get("sharedCounters"), "spec.sharedCounters"),
    )


def _device(
    f: Fields, raw: Any, path: str, basic: bool, slice_feature: str | None, per_device: bool
) -> SliceDevice:
    device = f.mapping(raw, path)
    name = f.dns_label(device.get("name"), f"{path}.name")
    body, at = (f.mapping(device.get("basic"), f"{path}.basic"), f"{path}.basic") if basic else (device, path)
    attributes = {
        key: _attribute(f, value, f"{at}.attributes[{key}]")
        for key, value in _named(f, body.get("attributes"), f"{at}.attributes").items()
    }
    shared = f.boolean(body.get("allowMultipleAllocations"), f"{at}.allowMultipleAllocations")
    capacity: dict[str, DeviceCapacity] = {
        key: read_device_capacity(f, value, f"{at}.capacity[{key}]", shared)
        for key, value in _named(f, body.get("capacity"), f"{at}.capacity").items()
    }
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        raise f.error(at, f"has {len(attributes) + len(capacity)} attributes and capacities, at most 32")
    values = sum(len(a.elements) for a in attributes.values())
    if values > MAX_ATTRIBUTE_VALUES:
        raise f.error(
            f"{at}.attributes",
            f"has {values} values (a list's elements each count), at most {MAX_ATTRIBUTE_VALUES}",
        )
    feature = slice_feature
    if feature is None:
        feature = next(
            (feat for key, feat in _DEVICE_FEATURES if body.get(key) not in (None, False, [], {})), None
        )
    conditions = _conditions(f, body, at)
    return SliceDevice(
        name,
        attributes,
        capacity,
        feature,
        allow_multiple_allocations=shared,
        consumes_counters=read_consumption(f, body.get("consumesCounters"), f"{at}.consumesCounters"),
        taints=read_taints(f, body.get("taints"), f"{at}.taints"),
        binding_conditions=conditions[0],
        binding_failure_conditions=conditions[1],
        binds_to_node=f.boolean(body.get("bindsToNode"), f"{at}.bindsToNode"),
        **_node_selection(f, body, at, per_device),
    )


def _node_selection(f: Fields, body: Mapping[str, Any], at: str, per_device: bool) -> dict[str, Any]:
    """A device's own `nodeName`, `nodeSelector` or `allNodes`: exactly one when its slice has
    `perDeviceNodeSelection`, none otherwise (`validateDevice`)."""
    chosen = [k for k in _DEVICE_NODE_FIELDS if body.get(k) is not None]
    if not per_device:
        if chosen:
            raise f.error(
                at,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is "
                "set to true in the ResourceSlice spec",
            )
        return {}
    if len(chosen) != 1:
        raise f.error(
            at,
            "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )
    [key] = chosen
    if key == "nodeName":
        return {"node_name": f.dns_subdomain(body.get("nodeName"), f"{at}.nodeName")}
    if key == "allNodes":
        if body.get("allNodes") is not True:
            raise f.error(f"{at}.allNodes", "must be either unset or set to true")
        return {"all_nodes": True}
    return {"node_selector": read_node_selector(f, body.get("nodeSelector"), f"{at}.nodeSelector")}


def _conditions(f: Fields, body: Mapping[str, Any], at: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`bindingConditions` and `bindingFailureConditions`: at most 4 each, condition types (qualified
    names), no repeats, none in both, and one list never without the other
    (`validateDeviceBindingParameters`)."""
    lists: list[tuple[str, ...]] = []
    for field in ("bindingConditions", "bindingFailureConditions"):
        path = f"{at}.{field}"
        items: list[str] = []
        for i, raw in enumerate(f.items(body.get(field), path, at_most=MAX_BINDING_CONDITIONS)):
            name = f.string(raw, f"{path}[{i}]", required=True)
            if not is_qualified_name(name):
                raise f.error(f"{path}[{i}]", f"{shown(name)} is not a condition type (a qualified name)")
            if name in items:
                raise f.error(f"{path}[{i}]", f"Duplicate value: {shown(name)}")
            if lists and name in lists[0]:
                raise f.error(
                    f"{path}[{i}]", "bindingFailureConditions must not overlap with bindingConditions"
                )
            items.append(name)
        lists.append(tuple(items))
    conditions, failures = lists
    if failures and not conditions:
        raise f.error(
            f"{at}.bindingConditions", "bindingConditions are required to use bindingFailureConditions"
        )
    if conditions and not failures:
        raise f.error(
            f"{at}.bindingFailureConditions", "bindingFailureConditions are required to use bindingConditions"
        )
    return conditions, failures


def _named(f: Fields, value: Any, path: str) -> Mapping[str, Any]:
    out = f.mapping(value, path)
    for key in out:
        if not isinstance(key, str) or not is_qualified_attribute(key, domain_required=False):
            raise f.error(
                f"{path}[{key}]", "is not an attribute name (<identifier> or <domain>/<identifier>)"
            )
    return out


def _attribute(f: Fields, raw: Any, path: str) -> AttributeValue:
    """One attribute: exactly one field, a value or (alpha upstream, DRAListTypeAttributes) a non-empty
    list of values of one type, each checked as the single value is."""
    value = f.mapping(raw, path)
    kinds = [k for k in _ATTRIBUTE_KINDS if k in value]
    if len(kinds) != 1:
        raise f.error(path, f"must have exactly one of {', '.join(_ATTRIBUTE_KINDS[:-1])} or versions")
    [kind] = kinds
    element_kind = LIST_KINDS.get(kind)
    if element_kind is None:
        return AttributeValue(kind, _scalar(f, kind, value[kind], f"{path}.{kind}"))  # type: ignore[arg-type]
    items = f.items(value[kind], f"{path}.{kind}")
    if not items:
        raise f.error(f"{path}.{kind}", "must not be empty")
    elements = tuple(_scalar(f, element_kind, item, f"{path}.{kind}[{i}]") for i, item in enumerate(items))
    return AttributeValue(kind, elements)  # type: ignore[arg-type]


def _scalar(f: Fields, kind: str, item: Any, path: str) -> int | bool | str:
    if kind == "int":
        if isinstance(item, bool) or not isinstance(item, int) or not _INT64[0] <= item <= _INT64[1]:
            raise f.error(path, f"{item!r} is not a 64-bit integer")
        return item
    if kind == "bool":
        return f.boolean(item, path)
    text = f.string(item, path)
    if len(text) > 64:
        raise f.error(path, f"has {len(text)} characters, at most 64")
    if kind == "version" and not _SEMVER.fullmatch(text):
        raise f.error(path, f"{text!r} is not a semantic version (e.g. 1.2.3)")
    return text
