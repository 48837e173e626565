"""What a driver's ResourceSlices hold, from its devices: pure functions, shared by both modes.

The API server and the node daemon read the same content, so cluster mode and the slice file differ only
in metadata (a generated name and an owner on one side, `<node>-<driver>-<n>` on the other). Bad content is
refused here, before it reaches either reader, with one line naming the device: the API server would
refuse it too, but only after the slice was sent, and the retries would never end.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubedevice.plugin.dra.backend_api import PublishedDevice
from kubedevice.plugin.dra.device_model import CounterSet, DeviceCapacity
from kubedevice.resource.quantity import parse_quantity
from kubedevice.resource.slice_rules import (
    MAX_COUNTER_SETS,
    MAX_DEVICES,
    MAX_DEVICES_WITH_TAINTS_OR_COUNTERS,
    uses_taints_or_counters,
    validate_device,
    validate_pool,
)
from kubedevice.resource.times import metav1_time

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceSlice"
#: The API's limit on attributes and capacities of one device, together.
MAX_ATTRIBUTES_AND_CAPACITIES = 32
#: Attributes the backend publishes itself; a device may not set them.
DEVICE_ID_ATTRIBUTE = "deviceID"
NUMA_NODE_ATTRIBUTE = "numaNode"
VERSION_PREFIX = "version:"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NOT_LABEL_CHARS = re.compile(r"[^a-z0-9]+")
#: A sanitised ID keeps at most this much, so that `-<16 hex>` still fits a 63-character label.
_SANITISED_MAX = 46
_HASH_HEX = 16
# The API's attribute and capacity names: a C identifier of at most 32 characters, optionally qualified
# by a DNS subdomain (`gpu.example.com/model`).
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Semantic versioning 2.0.0, as the API checks `version` attributes.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
# A Kubernetes quantity: a decimal number with an optional binary, decimal or exponent suffix.
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_INT64 = (-(2**63), 2**63 - 1)


class SliceContentError(ValueError):
    """A device cannot be published as given; str() is one line naming the device and what to change."""


def device_name(device_id: str) -> str:
    """The slice's device name for a device ID: the ID itself when it is a DNS label, else a label made
    from it (lower case, other characters as "-", at most 46 of them) and the first 16 hex digits of the
    ID's SHA-256, so that IDs that sanitise alike still get distinct names."""
    if len(device_id) <= 63 and _DNS_LABEL.match(device_id):
        return device_id
    digest = hashlib.sha256(device_id.encode()).hexdigest()[:_HASH_HEX]
    sanitised = _NOT_LABEL_CHARS.sub("-", device_id.lower()).strip("-")[:_SANITISED_MAX].strip("-")
    return f"{sanitised}-{digest}" if sanitised else f"d-{digest}"


def attribute_value(name: str, value: str | int | bool) -> dict[str, Any]:
    """One attribute in the API's typed form: `{bool: …}`, `{int: …}`, `{version: …}` for a string
    `version:1.2.3`, else `{string: …}`."""
    # bool first: in Python it is also an int.
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise SliceContentError(f"attribute {name}: {value} does not fit the API's 64-bit int")
        return {"int": value}
    if isinstance(value, str):
        if value.startswith(VERSION_PREFIX):
            version = value[len(VERSION_PREFIX) :]
            if not _SEMVER.match(version):
                raise SliceContentError(
                    f'attribute {name}: "{version}" is not a semantic version — '
                    "write version:MAJOR.MINOR.PATCH"
                )
            return {"version": version}
        if len(value) > 64:
            raise SliceContentError(f"attribute {name}: a string of {len(value)} characters (at most 64)")
        return {"string": value}
    raise SliceContentError(f"attribute {name}: {type(value).__name__} is not a str, int or bool")


def _check_name(kind: str, name: str) -> None:
    domain, slash, identifier = name.rpartition("/")
    ok = bool(_IDENTIFIER.match(identifier)) and (
        not slash or (len(domain) <= 63 and bool(_DNS_SUBDOMAIN.match(domain)))
    )
    if not ok:
        raise SliceContentError(
            f'{kind} name "{name}" is not valid — use a C identifier of at most 32 characters, '
            "optionally prefixed by a DNS domain and /"
        )


def device_json(device: PublishedDevice) -> dict[str, Any]:
    """One entry of `spec.devices`: its name, attributes (deviceID, numaNode, the device's own), capacity,
    and the DRA fields it uses (counters consumed, taints, multiple allocations, binding conditions)."""
    try:
        attributes: dict[str, Any] = {DEVICE_ID_ATTRIBUTE: {"string": device.id}}
        if len(device.numa_nodes) == 1:
            attributes[NUMA_NODE_ATTRIBUTE] = {"int": device.numa_nodes[0]}
        for name, value in sorted(device.attributes.items()):
            if name in (DEVICE_ID_ATTRIBUTE, NUMA_NODE_ATTRIBUTE):
                raise SliceContentError(f"attribute {name} is published by the SDK; give it another name")
            _check_name("attribute", name)
            attributes[name] = attribute_value(name, value)
        capacity: dict[str, Any] = {}
        for name, quantity in sorted(device.capacity.items()):
            _check_name("capacity", name)
            given = quantity.to_json() if isinstance(quantity, DeviceCapacity) else {"value": quantity}
            if not isinstance(given["value"], str) or not _QUANTITY.match(given["value"]):
                raise SliceContentError(
                    f'capacity {name}: "{given["value"]}" is not a quantity — write e.g. "16Gi", "2" or '
                    '"500m"'
                )
            capacity[name] = given
        if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
            raise SliceContentError(
                f"{len(attributes)} attributes and {len(capacity)} capacities: the API allows at most "
                f"{MAX_ATTRIBUTES_AND_CAPACITIES} together (deviceID and numaNode count)"
            )
    except SliceContentError as err:
        raise SliceContentError(f"device {device.id}: {err}") from None
    entry: dict[str, Any] = {"name": device_name(device.id), "attributes": attributes}
    if capacity:
        entry["capacity"] = capacity
    entry.update(_dra_fields(device))
    errors = validate_device(entry, "device")
    if errors:
        raise SliceContentError(f"device {device.id}: " + "; ".join(str(e) for e in errors))
    return entry


def _dra_fields(device: PublishedDevice) -> dict[str, Any]:
    """The fields of partitionable devices, taints, consumable capacity and binding conditions, each only
    when used (an API server without the feature drops a field it does not know)."""
    out: dict[str, Any] = {}
    if device.consumes_counters:
        out["consumesCounters"] = [c.to_json() for c in device.consumes_counters]
    if device.taints:
        out["taints"] = [t.to_json() for t in device.taints]
    if device.allow_multiple_allocations:
        out["allowMultipleAllocations"] = True
    if device.binding_conditions or device.binding_failure_conditions:
        out["bindingConditions"] = list(device.binding_conditions)
        out["bindingFailureConditions"] = list(device.binding_failure_conditions)
    if device.binds_to_node:
        out["bindsToNode"] = True
    return out


@dataclass(frozen=True, slots=True)
class PoolContent:
    """What a pool's slices hold, one body each, in the order they are published: the counter sets first
    (at most 8 a slice, in slices without devices, as the API requires), then the devices (at most 128 a
    slice, 64 in a slice where a device has taints or consumes counters)."""

    bodies: tuple[Mapping[str, Any], ...]

    @property
    def slice_count(self) -> int:
        return len(self.bodies)

    @property
    def device_count(self) -> int:
        return sum(len(body.get("devices") or ()) for body in self.bodies)


def pool_content(devices: Sequence[PublishedDevice], counter_sets: Sequence[CounterSet] = ()) -> PoolContent:
    """The devices as slice entries, in the order the driver lists them (upstream's allocator takes the
    first device that fits: the driver puts its preferred devices first, e.g. partitions before the whole
    GPU), after the counter sets, in the driver's order too. The same lists give the same slices.

    No device and no counter set gives one empty slice: the pool then exists with no devices, rather than
    not at all. Two IDs that give one name (or one ID twice), a counter set named twice, or a device that
    consumes a counter set or counter the pool does not have are refused (upstream's validatePool).
    """
    named = [(device_json(d), d.id) for d in devices]
    seen: dict[str, str] = {}
    for entry, device_id in named:
        name = str(entry["name"])
        other = seen.get(name)
        if other == device_id:
            raise SliceContentError(f"device {device_id}: listed twice — give each device a distinct ID")
        if other is not None:
            raise SliceContentError(
                f'devices {other!r} and {device_id!r} would both be published as "{name}" — '
                "give each device a distinct ID"
            )
        seen[name] = device_id
    entries = [entry for entry, _ in named]
    sets = [c.to_json() for c in counter_sets]
    bodies: list[Mapping[str, Any]] = [
        {"sharedCounters": sets[i : i + MAX_COUNTER_SETS]} for i in range(0, len(sets), MAX_COUNTER_SETS)
    ]
    problems = validate_pool("", [*bodies, {"devices": entries}])
    if problems:
        raise SliceContentError(problems[0].replace(' in pool ""', "") + _fix(problems[0]))
    bodies += [{"devices": chunk} for chunk in _device_chunks(entries)]
    return PoolContent(tuple(bodies) or ({"devices": []},))


def _fix(problem: str) -> str:
    if problem.startswith("found duplicate"):
        return " — give each counter set a distinct name"
    return " — return that counter set (and counter) from shared_counters(), or consume another"


def _device_chunks(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Devices in order, a slice filled until the next device would break its limit (64 once a device of it
    has taints or consumes counters, else 128)."""
    chunks: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    limited = False
    for entry in entries:
        lower = limited or uses_taints_or_counters(entry)
        if len(current) + 1 > (MAX_DEVICES_WITH_TAINTS_OR_COUNTERS if lower else MAX_DEVICES):
            chunks.append(current)
            current, lower = [], uses_taints_or_counters(entry)
        current.append(entry)
        limited = lower
    return [*chunks, current] if current else chunks


def slice_spec(
    *, driver: str, node_name: str, generation: int, content: PoolContent, index: int
) -> dict[str, Any]:
    """The spec of slice `index` of the pool: pool name = node name, this generation, the slice count."""
    body = content.bodies[index]
    return {
        "driver": driver,
        "nodeName": node_name,
        "pool": {"name": node_name, "generation": generation, "resourceSliceCount": content.slice_count},
        **{key: [dict(item) for item in items] for key, items in body.items()},
    }


def standalone_slices(
    *, driver: str, node_name: str, generation: int, content: PoolContent
) -> list[dict[str, Any]]:
    """The documents of the standalone slice file: each named `<node>-<driver>-<n>`, n from 0."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": f"{node_name}-{driver}-{index}"},
            "spec": slice_spec(
                driver=driver, node_name=node_name, generation=generation, content=content, index=index
            ),
        }
        for index in range(content.slice_count)
    ]


#: The fields whose strings are quantities (a capacity's and a counter's `value`, a request policy's).
_QUANTITY_FIELDS = frozenset(("value", "default", "min", "max", "step"))


def body_key(body: Mapping[str, Any]) -> Any:
    """What makes two slice bodies (`devices` or `sharedCounters`) the same content: every field, with
    quantities compared as numbers and times to the second; a quantity written another way ("512Mi" for
    "0.5Gi", as the API server sends it back) is no change."""
    return _canonical({k: body.get(k) or [] for k in ("devices", "sharedCounters")}, "")


def _canonical(value: Any, key: str) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _canonical(v, k)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v, "value" if key == "validValues" else "") for v in value)
    if key in _QUANTITY_FIELDS and isinstance(value, str):
        try:
            return ("quantity", parse_quantity(value))
        except ValueError:
            return ("unreadable", value)  # never equal to what is published, so it is replaced
    if key == "timeAdded" and isinstance(value, str):
        try:
            return ("time", metav1_time(datetime.fromisoformat(value)))
        except ValueError:
            return ("unreadable", value)
    return value


def taint_times(specs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str, str], datetime]:
    """(device name, key, value, effect) -> timeAdded of each taint in these slice specs (unreadable
    entries skipped): what a restarted driver keeps."""
    times: dict[tuple[str, str, str, str], datetime] = {}
    for spec in specs:
        for device in spec.get("devices") or ():
            for taint in (device.get("taints") or ()) if isinstance(device, Mapping) else ():
                with contextlib.suppress(AttributeError, KeyError, TypeError, ValueError):
                    key = (
                        str(device["name"]),
                        str(taint["key"]),
                        str(taint.get("value", "")),
                        str(taint["effect"]),
                    )
                    times[key] = datetime.fromisoformat(taint["timeAdded"])
    return times
