"""Reading checkpoint JSON with Go's ``encoding/json`` semantics, into the decoder's own raw entries."""

from __future__ import annotations

import binascii
import json
import re
from dataclasses import dataclass
from typing import Final

from kubedevice.checkpoint.errors import CheckpointFormatError
from kubedevice.checkpoint.model import PodDevicesEntry
from kubedevice.checkpoint.spew import utf8

#
# Python's json module parses the syntax; the walk below then gives the parsed values Go's meaning: null
# into a string or struct changes nothing, null into a slice or map makes it nil, keys match struct fields
# exactly first and then case-insensitively, unknown keys are skipped, a map decoded twice merges, and a
# slice decoded twice reuses its elements. A value of the wrong type is an error naming the field.


class JSONNumber(str):
    """A JSON number kept as its source text: Go parses it only once it knows the target type."""

    __slots__ = ()


class JSONObject:
    """A JSON object with its keys in document order, duplicates kept (Go applies them in turn)."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        self.pairs = pairs


def _reject_constant(name: str) -> object:
    raise CheckpointFormatError(f"invalid JSON: {name} is not a JSON value")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, JSONNumber):
        return "number " + (value if len(value) <= 40 else value[:40] + "...")
    if isinstance(value, str):
        return "string"
    if isinstance(value, JSONObject):
        return "object"
    return "array"


def type_error(path: str, value: object, expected: str) -> CheckpointFormatError:
    return CheckpointFormatError(f"{path}: cannot decode {_kind(value)} as {expected}")


# Go folds ASCII letters, and the Kelvin sign and long s onto k and s, when it matches keys to field names.
_FOLD: Final = str.maketrans(
    {**{chr(c): chr(c + 32) for c in range(ord("A"), ord("Z") + 1)}, "\u212a": "k", "\u017f": "s"}
)


def match_field(key: str, names: tuple[str, ...]) -> str | None:
    if key in names:
        return key
    folded = key.translate(_FOLD)
    for name in names:
        if folded == name.lower():
            return name
    return None


# Go's strconv.ParseInt/ParseUint in base 10: an optional sign (signed only), ASCII digits, leading zeros
# allowed. Leading zeros are dropped before int() so that no digit string can reach Python's length limit.
_INTEGER: Final = re.compile(r"([+-]?)0*([0-9]+)")


def parse_int(text: str, signed: bool, bits: int) -> int | None:
    match = _INTEGER.fullmatch(text)
    if match is None or (match.group(1) and not signed) or len(match.group(2)) > 20:
        return None
    number = int(match.group(2))
    if match.group(1) == "-":
        number = -number
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return number if low <= number <= high else None


#: An entry's fields as the kubelet writes them, in its order.
_ENTRY_FIELDS: Final = ("PodUID", "ContainerName", "ResourceName", "DeviceIDs", "AllocResp")


@dataclass(slots=True)
class _RawEntry:
    """An entry as decoded, before nil inner lists are normalised; mutable because Go decodes in place."""

    pod_uid: str = ""
    container_name: str = ""
    resource_name: str = ""
    device_ids: dict[int, list[str] | None] | list[str] | None = None
    alloc_resp: bytes | None = None


@dataclass(slots=True)
class RawCheckpoint:
    # The kubelet decodes into an empty slice and an empty map, so absent fields stay empty, not nil.
    #: An entry of the kubelet's exact shape is decoded straight into its final form.
    entries: list[_RawEntry | PodDevicesEntry] | None
    registered: dict[str, list[str] | None] | None
    checksum: int = 0


class GoStrings:
    """Reads strings as Go's ``encoding/json`` does into a field: null keeps the field's value, a lone
    surrogate (Python keeps ``\\ud800``, Go makes U+FFFD) is scrubbed only when ``scrub`` asks, since only
    a text with such an escape needs every string checked."""

    def __init__(self, scrub: bool) -> None:
        self.scrub = scrub

    def string(self, value: object, current: str, path: str) -> str:
        if value is None:
            return current
        if isinstance(value, str) and not isinstance(value, JSONNumber):
            if self.scrub:
                return utf8(value).decode("utf-8")
            return value
        raise type_error(path, value, "a string")

    def strlist(self, value: object, current: list[str] | None, path: str) -> list[str] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise type_error(path, value, "an array of strings")
        old = current or []
        return [
            self.string(item, old[i] if i < len(old) else "", f"{path}[{i}]") for i, item in enumerate(value)
        ]


class Decoder(GoStrings):
    """Decodes parsed JSON into the kubelet's types: v2 (``DeviceIDs`` by NUMA node) or v1 (a flat list)."""

    def __init__(self, v1: bool, scrub: bool) -> None:
        super().__init__(scrub)
        self.v1 = v1

    def checkpoint(self, doc: object) -> RawCheckpoint:
        raw = RawCheckpoint(entries=[], registered={})
        if doc is None:
            return raw
        if not isinstance(doc, JSONObject):
            raise type_error("checkpoint", doc, "an object")
        for key, value in doc.pairs:
            name = match_field(key, ("Data", "Checksum"))
            if name == "Data":
                self.data(value, raw)
            elif name == "Checksum" and value is not None:
                raw.checksum = self.uint(value, 64, "Checksum")
        return raw

    def uint(self, value: object, bits: int, path: str) -> int:
        number = parse_int(value, signed=False, bits=bits) if isinstance(value, JSONNumber) else None
        if number is None:
            raise type_error(path, value, f"an unsigned {bits}-bit integer")
        return number

    def data(self, value: object, raw: RawCheckpoint) -> None:
        if value is None:
            return
        if not isinstance(value, JSONObject):
            raise type_error("Data", value, "an object")
        for key, item in value.pairs:
            name = match_field(key, ("PodDeviceEntries", "RegisteredDevices"))
            if name == "PodDeviceEntries":
                raw.entries = self.entries(item, raw.entries)
            elif name == "RegisteredDevices":
                raw.registered = self.registered(item, raw.registered)

    def entries(
        self, value: object, current: list[_RawEntry | PodDevicesEntry] | None
    ) -> list[_RawEntry | PodDevicesEntry] | None:
        path = "Data.PodDeviceEntries"
        if value is None:
            return None
        if not isinstance(value, list):
            raise type_error(path, value, "an array of entries")
        old = current or []
        result: list[_RawEntry | PodDevicesEntry] = []
        fast = not (self.v1 or self.scrub)
        for i, item in enumerate(value):
            if fast and i >= len(old) and type(item) is JSONObject:
                finished = _kubelet_entry(item.pairs)
                if finished is not None:
                    result.append(finished)
                    continue
            entry = old[i] if i < len(old) else _RawEntry()
            if isinstance(entry, PodDevicesEntry):
                # Decoded a second time (a repeated key): Go decodes into the same entry, in place.
                ids: dict[int, list[str] | None] = dict(entry.device_ids or {})
                entry = _RawEntry(
                    entry.pod_uid, entry.container_name, entry.resource_name, ids, entry.alloc_resp
                )
            self.entry(item, entry, f"{path}[{i}]")
            result.append(entry)
        return result

    def registered(
        self, value: object, current: dict[str, list[str] | None] | None
    ) -> dict[str, list[str] | None] | None:
        path = "Data.RegisteredDevices"
        if value is None:
            return None
        if not isinstance(value, JSONObject):
            raise type_error(path, value, "an object mapping resource names to device IDs")
        result = {} if current is None else current
        for key, item in value.pairs:
            resource = self.string(key, "", path)
            result[resource] = self.strlist(item, None, f"{path}[{key!r}]")
        return result

    def entry(self, value: object, entry: _RawEntry, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, JSONObject):
            raise type_error(path, value, "an object")
        for key, item in value.pairs:
            name = match_field(key, ("PodUID", "ContainerName", "ResourceName", "DeviceIDs", "AllocResp"))
            if name == "PodUID":
                entry.pod_uid = self.string(item, entry.pod_uid, f"{path}.PodUID")
            elif name == "ContainerName":
                entry.container_name = self.string(item, entry.container_name, f"{path}.ContainerName")
            elif name == "ResourceName":
                entry.resource_name = self.string(item, entry.resource_name, f"{path}.ResourceName")
            elif name == "DeviceIDs":
                entry.device_ids = self.device_ids(item, entry.device_ids, f"{path}.DeviceIDs")
            elif name == "AllocResp":
                entry.alloc_resp = self.alloc_resp(item, entry.alloc_resp, f"{path}.AllocResp")

    def device_ids(
        self, value: object, current: dict[int, list[str] | None] | list[str] | None, path: str
    ) -> dict[int, list[str] | None] | list[str] | None:
        if self.v1:
            return self.strlist(value, current if isinstance(current, list) else None, path)
        if value is None:
            return None
        if not isinstance(value, JSONObject):
            raise type_error(path, value, "an object mapping NUMA node to device IDs")
        result = current if isinstance(current, dict) else {}
        for key, item in value.pairs:
            node = parse_int(key, signed=True, bits=64)
            if node is None:
                raise CheckpointFormatError(f"{path}: NUMA node {key!r} is not a 64-bit integer")
            result[node] = self.strlist(item, None, f"{path}[{key!r}]")
        return result

    def alloc_resp(self, value: object, current: bytes | None, path: str) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, str) and not isinstance(value, JSONNumber):
            # Go's base64 reader skips line breaks, wants the padding, and rejects anything else.
            text = value.replace("\r", "").replace("\n", "")
            try:
                if len(text) % 4:
                    raise binascii.Error("length is not a multiple of 4")
                return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
            except (binascii.Error, UnicodeEncodeError) as err:
                raise CheckpointFormatError(f"{path}: invalid base64: {err}") from None
        if isinstance(value, list):
            # Go also decodes a []byte from an array of numbers.
            old = current or b""
            result = bytearray()
            for i, item in enumerate(value):
                if item is not None:
                    result.append(self.uint(item, 8, f"{path}[{i}]"))
                else:
                    # null leaves the element as it was: zero, or the byte of an earlier decode.
                    result.append(old[i] if i < len(old) else 0)
            return bytes(result)
        raise type_error(path, value, "a base64 string")


def _kubelet_entry(pairs: list[tuple[str, object]]) -> PodDevicesEntry | None:
    """Decode an entry of the exact shape the kubelet writes (each field once, in its order, of its type,
    no null device list) without the general walk; None for anything else, which the walk then decodes or
    reports. A restart reads 10^4 such entries. The caller checks the rest: v2, no scrubbing, a fresh entry.
    """
    if len(pairs) != 5:
        return None
    (k1, uid), (k2, container), (k3, resource), (k4, ids), (k5, resp) = pairs
    if (
        (k1, k2, k3, k4, k5) != _ENTRY_FIELDS
        or type(uid) is not str
        or type(container) is not str
        or type(resource) is not str
        or type(ids) is not JSONObject
        or type(resp) is not str
        or len(resp) % 4
        or not resp.isascii()
    ):
        return None
    device_ids: dict[int, list[str]] = {}
    for node, devices in ids.pairs:
        # Plain decimal NUMA nodes; a sign, leading zeros or a long number take the exact walk.
        if not (node.isascii() and node.isdigit() and len(node) < 19 and (node == "0" or node[0] != "0")):
            return None
        if type(devices) is not list:
            return None
        for device in devices:
            if type(device) is not str:
                return None
        device_ids[int(node)] = devices
    try:
        # Go's reader also skips line breaks; a response with any takes the exact walk.
        alloc_resp = binascii.a2b_base64(resp.encode("ascii"), strict_mode=True)
    except binascii.Error:
        return None
    return PodDevicesEntry(uid, container, resource, device_ids, alloc_resp)


def parse_json(raw: bytes) -> tuple[object, bool]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise CheckpointFormatError(
            f"invalid UTF-8 at line {line}, column {column} (byte offset {err.start})"
        ) from None
    if not text:
        raise CheckpointFormatError("invalid JSON: the file is empty")
    try:
        doc = json.loads(
            text,
            object_pairs_hook=JSONObject,
            parse_int=JSONNumber,
            parse_float=JSONNumber,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as err:
        raise CheckpointFormatError(
            f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:
        raise CheckpointFormatError("invalid JSON: nested too deeply") from None
    return doc, re.search(r"\\u[dD][89a-fA-F]", text) is not None
