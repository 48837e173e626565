"""What a driver's ResourceSlices hold, from its devices: pure functions, shared by both modes.

The API server and the node daemon read the same content, so cluster mode and the slice file differ only
in metadata (a generated name and an owner on one side, `<node>-<driver>-<n>` on the other). Bad content is
refused here, before it reaches either reader, with one line naming the device: the API server would
refuse it too, but only after the slice was sent, and the retries would never end.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubedevice.plugin.dra.backend_api import PublishedDevice

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceSlice"
#: The API's limit on `spec.devices` of one slice.
MAX_DEVICES_PER_SLICE = 128
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
    """One entry of `spec.devices`: its name, attributes (deviceID, numaNode, the device's own), capacity."""
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
            if not isinstance(quantity, str) or not _QUANTITY.match(quantity):
                raise SliceContentError(
                    f'capacity {name}: "{quantity}" is not a quantity — write e.g. "16Gi", "2" or "500m"'
                )
            capacity[name] = {"value": quantity}
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
    return entry


@dataclass(frozen=True, slots=True)
class PoolContent:
    """A pool's devices, in the order they are published, cut into slices of at most 128."""

    chunks: tuple[tuple[dict[str, Any], ...], ...]

    @property
    def slice_count(self) -> int:
        return len(self.chunks)


def pool_content(devices: Sequence[PublishedDevice]) -> PoolContent:
    """The devices as slice entries, sorted by name so that the same set always gives the same slices.

    No device gives one empty slice: the pool then exists with no devices, rather than not at all.
    Two IDs that give one name (or one ID twice) are refused: a pool's device names are its keys.
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
    entries = sorted((entry for entry, _ in named), key=lambda e: str(e["name"]))
    chunks = tuple(
        tuple(entries[i : i + MAX_DEVICES_PER_SLICE]) for i in range(0, len(entries), MAX_DEVICES_PER_SLICE)
    )
    return PoolContent(chunks or ((),))


def slice_spec(
    *, driver: str, node_name: str, generation: int, content: PoolContent, index: int
) -> dict[str, Any]:
    """The spec of slice `index` of the pool: pool name = node name, this generation, the slice count."""
    return {
        "driver": driver,
        "nodeName": node_name,
        "pool": {"name": node_name, "generation": generation, "resourceSliceCount": content.slice_count},
        "devices": [dict(entry) for entry in content.chunks[index]],
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


_SUFFIX_FACTORS: dict[str, Fraction] = {
    **{s: Fraction(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Fraction(1000) ** (i + 1) for i, s in enumerate(("k", "M", "G", "T", "P", "E"))},
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
}


def quantity_value(quantity: str) -> Fraction:
    """A quantity's exact value: the API server may send back "512Mi" for a published "0.5Gi"."""
    match = _QUANTITY.match(quantity)
    if match is None:
        raise SliceContentError(f'"{quantity}" is not a quantity')
    suffix = match.group(3) or ""
    number = quantity[: len(quantity) - len(suffix)]
    # "2E" is two exa; "2E3" is an exponent.
    if len(suffix) > 1 and suffix[0] in "eE" and suffix[1] != "i":
        return Fraction(number) * Fraction(10) ** int(suffix[1:])
    return Fraction(number) * _SUFFIX_FACTORS[suffix]


def devices_key(devices: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any, Any]]:
    """What makes two device lists the same content: names, attributes and capacity values (compared as
    numbers); a field the API server added or a quantity written another way is no change."""
    key = []
    for device in devices:
        capacity = device.get("capacity") or {}
        values: dict[str, Any]
        try:
            values = {name: quantity_value(str(entry.get("value"))) for name, entry in capacity.items()}
        except (SliceContentError, AttributeError):
            values = {"": capacity}  # unreadable: never equal to what we publish, so it is replaced
        key.append((str(device.get("name")), device.get("attributes") or {}, values))
    return key
