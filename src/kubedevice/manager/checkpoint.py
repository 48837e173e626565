"""The device manager's on-disk snapshot: the kubelet's `kubelet_internal_checkpoint` (SPEC.md §7).

Three concerns live here, each kept byte-compatible with a real kubelet:

* the **checksum** (§7.4): FNV-1a 32 over the go-spew ``%#v`` text of the data, so a file we write verifies in
  a real kubelet and a real kubelet's file verifies here;
* the **codec**: JSON exactly as Go's ``encoding/json`` writes it, and a reader that accepts what Go's reader
  accepts (unknown fields, case-insensitive keys, null versus absent) and turns everything else into a
  :class:`CheckpointError` with a one-line message, including the pre-1.20 ("v1") format (§7.3);
* the **store**: a durable, atomic write (temp file, fsync, rename, directory fsync) and a read that never
  crashes on a bad file.

Go distinguishes a nil slice or map from an empty one, and both the checksum and the JSON show the
difference (``<nil>``/``null`` versus ``[]``/``map[]``/``{}``), so the dataclasses keep ``None`` apart from
empty containers.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Protocol

import fnv_c

from kubedevice.api.constants import CHECKPOINT_NAME

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "WRITE_STAGES",
    "CheckpointData",
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointNotFoundError",
    "CheckpointStore",
    "CheckpointUnreadableError",
    "CorruptCheckpointError",
    "DecodedCheckpoint",
    "PodDevicesEntry",
    "UnverifiedCheckpoint",
    "checksum",
    "decode",
    "decode_unverified",
    "encode",
    "read_file",
    "spew_text",
]

#: A file larger than this is refused rather than read into memory. A real checkpoint with 10,000
#: allocations is a few MiB; this bound only keeps a stray huge file from exhausting memory.
MAX_CHECKPOINT_BYTES: Final = 256 * 1024 * 1024

#: Stages at which CheckpointStore calls its fault hook during a write, in order.
WRITE_STAGES: Final = ("after-temp-write", "after-fsync", "after-rename")


# --------------------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True, slots=True)
class PodDevicesEntry:
    """The devices of one resource given to one container, as the kubelet records them."""

    pod_uid: str
    container_name: str
    resource_name: str
    #: NUMA node -> device IDs; -1 means no topology; None is Go's nil map (JSON null).
    device_ids: dict[int, list[str]] | None
    #: Serialized v1beta1.ContainerAllocateResponse; None is Go's nil slice (JSON null).
    alloc_resp: bytes | None


@dataclass(frozen=True, slots=True)
class CheckpointData:
    """The checkpointed state: allocations and the resources that were registered."""

    #: None is Go's nil slice (JSON null), which the kubelet writes when nothing is allocated.
    pod_device_entries: list[PodDevicesEntry] | None
    #: Resource -> its healthy device IDs at write time; None is Go's nil map (JSON null).
    registered_devices: dict[str, list[str]] | None


@dataclass(frozen=True, slots=True)
class DecodedCheckpoint:
    """A checkpoint as read from bytes."""

    data: CheckpointData
    #: The checksum as found in the file.
    checksum: int
    #: 2, or 1 for a pre-1.20 file whose device IDs were moved to NUMA node 0.
    format_version: int


@dataclass(frozen=True, slots=True)
class UnverifiedCheckpoint:
    """A checkpoint decoded without trusting its checksum, for inspection tools."""

    decoded: DecodedCheckpoint
    #: The checksum the content hashes to (with the algorithm of its format version).
    computed_checksum: int

    @property
    def valid(self) -> bool:
        return self.decoded.checksum == self.computed_checksum


# --------------------------------------------------------------------------------------------------------
# Errors


class CheckpointError(Exception):
    """Base of every checkpoint error; str() is a one-line human message."""


class CheckpointNotFoundError(CheckpointError):
    """There is no checkpoint file: the manager starts with empty state."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"checkpoint is not found: {path}")
        self.path = Path(path)


class CheckpointFormatError(CheckpointError):
    """The bytes are not a checkpoint: a JSON syntax error, a value of the wrong type, bad base64."""


class CheckpointUnreadableError(CheckpointFormatError):
    """The path exists but cannot be read as a checkpoint file (a directory, no permission, an I/O error)."""


class CorruptCheckpointError(CheckpointError):
    """The content does not hash to the checksum written in the file."""

    def __init__(self, expected: int, found: int) -> None:
        super().__init__(f"checksum mismatch: file says {found}, content hashes to {expected}")
        #: What the content hashes to.
        self.expected = expected
        #: What the file says.
        self.found = found


# --------------------------------------------------------------------------------------------------------
# The go-spew text and the checksum (§7.4)


class _EntryView(Protocol):
    """What the spew and JSON writers read from an entry: the public dataclass or the decoder's own."""

    @property
    def pod_uid(self) -> str: ...
    @property
    def container_name(self) -> str: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def device_ids(self) -> Mapping[int, Sequence[str] | None] | Sequence[str] | None: ...
    @property
    def alloc_resp(self) -> bytes | None: ...


_SPEW_HEAD: Final = "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)"
_SPEW_REG: Final = " RegisteredDevices:(map[string][]string)"


def _spew_strlist(items: Sequence[str] | None) -> str:
    return "<nil>" if items is None else "[" + " ".join(items) + "]"


def _spew_device_ids(ids: Mapping[int, Sequence[str] | None] | Sequence[str] | None, v1: bool) -> str:
    if v1:
        if isinstance(ids, Mapping):
            # The v1 format has no topology: the lists of all NUMA nodes, in node order, make one list.
            ids = [dev for node in sorted(ids) for dev in ids[node] or ()]
        return "([]string)" + _spew_strlist(ids)
    if ids is None:
        return "(checkpoint.DevicesPerNUMA)<nil>"
    if not isinstance(ids, Mapping):
        raise TypeError("v2 device IDs must map NUMA node to device IDs")
    return (
        "(checkpoint.DevicesPerNUMA)map["
        + " ".join(f"{node}:{_spew_strlist(ids[node])}" for node in sorted(ids))
        + "]"
    )


_DECIMAL: Final = [str(byte) for byte in range(256)]


def _spew_bytes(raw: bytes | None) -> str:
    # go-spew prints []uint8 as decimal numbers. A lookup table is the fastest way found to do that in
    # Python, which matters when 10,000 entries are hashed on every write.
    if raw is None:
        return "<nil>"
    decimal = _DECIMAL
    return "[" + " ".join([decimal[byte] for byte in raw]) + "]"


def _spew(
    entries: Iterable[_EntryView] | None, registered: Mapping[str, Sequence[str] | None] | None, v1: bool
) -> bytes:
    parts = [_SPEW_HEAD]
    if entries is None:
        parts.append("<nil>")
    else:
        parts.append(
            "["
            + " ".join(
                [
                    f"{{PodUID:(string){e.pod_uid} ContainerName:(string){e.container_name}"
                    f" ResourceName:(string){e.resource_name} DeviceIDs:{_spew_device_ids(e.device_ids, v1)}"
                    f" AllocResp:([]uint8){_spew_bytes(e.alloc_resp)}}}"
                    for e in entries
                ]
            )
            + "]"
        )
    parts.append(_SPEW_REG)
    if registered is None:
        parts.append("<nil>")
    else:
        parts.append(
            "map[" + " ".join([f"{r}:{_spew_strlist(registered[r])}" for r in sorted(registered)]) + "]"
        )
    parts.append("}")
    return _utf8("".join(parts))


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be UTF-8. Go would write U+FFFD for it, so both the hashed text and the
        # JSON use U+FFFD and the file still verifies after a round trip.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def spew_text(data: CheckpointData, *, v1: bool = False) -> bytes:
    """The go-spew ``%#v`` text the kubelet hashes (§7.4); ``v1`` gives the pre-1.20 text.

    For ``v1`` the device IDs of all NUMA nodes are flattened in node order into the v1 list.
    """
    return _spew(data.pod_device_entries, data.registered_devices, v1)


def checksum(data: CheckpointData, *, v1: bool = False) -> int:
    """FNV-1a 32 of :func:`spew_text`: the value the kubelet stores in ``Checksum``."""
    return int(fnv_c.fnv1a_32(_spew(data.pod_device_entries, data.registered_devices, v1)))


# --------------------------------------------------------------------------------------------------------
# Go encoding/json writer


# Go escapes control characters, the quote, the backslash, the HTML-sensitive <, > and &, and the JavaScript
# line separators. Python's json module differs (\b, \f, no HTML escaping), so strings are escaped here.
_NEEDS_ESCAPE: Final = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029]')
_ESCAPES: Final = {
    **{chr(c): f"\\u{c:04x}" for c in range(0x20)},
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    '"': '\\"',
    "\\": "\\\\",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _escape_match(match: re.Match[str]) -> str:
    return _ESCAPES[match.group()]


def _json_str(value: str) -> str:
    if _NEEDS_ESCAPE.search(value) is None:
        return '"' + value + '"'
    return '"' + _NEEDS_ESCAPE.sub(_escape_match, value) + '"'


def _json_strlist(items: Sequence[str] | None) -> str:
    if items is None:
        return "null"
    return "[" + ",".join([_json_str(item) for item in items]) + "]"


def _json_device_ids(ids: Mapping[int, Sequence[str] | None] | None) -> str:
    if ids is None:
        return "null"
    # Go sorts map keys by their string form: "-1" < "0" < "10" < "2".
    keys = sorted([str(node) for node in ids])
    return "{" + ",".join([f'"{key}":{_json_strlist(ids[int(key)])}' for key in keys]) + "}"


def _json_bytes(raw: bytes | None) -> str:
    return "null" if raw is None else '"' + base64.b64encode(raw).decode("ascii") + '"'


def _json_entry(e: PodDevicesEntry) -> str:
    return (
        f'{{"PodUID":{_json_str(e.pod_uid)},"ContainerName":{_json_str(e.container_name)}'
        f',"ResourceName":{_json_str(e.resource_name)},"DeviceIDs":{_json_device_ids(e.device_ids)}'
        f',"AllocResp":{_json_bytes(e.alloc_resp)}}}'
    )


def encode(data: CheckpointData) -> bytes:
    """The checkpoint file's bytes, as the kubelet's ``json.Marshal`` writes them, with the v2 checksum."""
    entries = data.pod_device_entries
    registered = data.registered_devices
    entries_json = "null" if entries is None else "[" + ",".join([_json_entry(e) for e in entries]) + "]"
    if registered is None:
        registered_json = "null"
    else:
        registered_json = (
            "{"
            + ",".join([f"{_json_str(r)}:{_json_strlist(registered[r])}" for r in sorted(registered)])
            + "}"
        )
    text = (
        f'{{"Data":{{"PodDeviceEntries":{entries_json},"RegisteredDevices":{registered_json}}}'
        f',"Checksum":{checksum(data)}}}'
    )
    return _utf8(text)


# --------------------------------------------------------------------------------------------------------
# Go encoding/json reader
#
# Python's json module parses the syntax; the walk below then gives the parsed values Go's meaning: null
# into a string or struct changes nothing, null into a slice or map makes it nil, keys match struct fields
# exactly first and then case-insensitively, unknown keys are skipped, a map decoded twice merges, and a
# slice decoded twice reuses its elements. A value of the wrong type is an error naming the field.


class _Number(str):
    """A JSON number kept as its source text: Go parses it only once it knows the target type."""

    __slots__ = ()


class _Object:
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
    if isinstance(value, _Number):
        return "number " + (value if len(value) <= 40 else value[:40] + "...")
    if isinstance(value, str):
        return "string"
    if isinstance(value, _Object):
        return "object"
    return "array"


def _type_error(path: str, value: object, expected: str) -> CheckpointFormatError:
    return CheckpointFormatError(f"{path}: cannot decode {_kind(value)} as {expected}")


# Go folds ASCII letters, and the Kelvin sign and long s onto k and s, when it matches keys to field names.
_FOLD: Final = str.maketrans(
    {**{chr(c): chr(c + 32) for c in range(ord("A"), ord("Z") + 1)}, "\u212a": "k", "\u017f": "s"}
)


def _field(key: str, names: tuple[str, ...]) -> str | None:
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


def _parse_int(text: str, signed: bool, bits: int) -> int | None:
    match = _INTEGER.fullmatch(text)
    if match is None or (match.group(1) and not signed) or len(match.group(2)) > 20:
        return None
    number = int(match.group(2))
    if match.group(1) == "-":
        number = -number
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return number if low <= number <= high else None


@dataclass(slots=True)
class _RawEntry:
    """An entry as decoded, before nil inner lists are normalised; mutable because Go decodes in place."""

    pod_uid: str = ""
    container_name: str = ""
    resource_name: str = ""
    device_ids: dict[int, list[str] | None] | list[str] | None = None
    alloc_resp: bytes | None = None


@dataclass(slots=True)
class _RawCheckpoint:
    # The kubelet decodes into an empty slice and an empty map, so absent fields stay empty, not nil.
    entries: list[_RawEntry] | None
    registered: dict[str, list[str] | None] | None
    checksum: int = 0


class _Decoder:
    """Decodes parsed JSON into the kubelet's types: v2 (``DeviceIDs`` by NUMA node) or v1 (a flat list)."""

    def __init__(self, v1: bool, scrub: bool) -> None:
        self.v1 = v1
        # Go turns an escaped lone surrogate (\ud800) into U+FFFD; Python keeps it. Only when the text has
        # such an escape is every string checked, to keep the common path fast.
        self.scrub = scrub

    def string(self, value: object, current: str, path: str) -> str:
        if value is None:
            return current
        if isinstance(value, str) and not isinstance(value, _Number):
            if self.scrub:
                return _utf8(value).decode("utf-8")
            return value
        raise _type_error(path, value, "a string")

    def strlist(self, value: object, current: list[str] | None, path: str) -> list[str] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise _type_error(path, value, "an array of strings")
        old = current or []
        return [
            self.string(item, old[i] if i < len(old) else "", f"{path}[{i}]") for i, item in enumerate(value)
        ]

    def checkpoint(self, doc: object) -> _RawCheckpoint:
        raw = _RawCheckpoint(entries=[], registered={})
        if doc is None:
            return raw
        if not isinstance(doc, _Object):
            raise _type_error("checkpoint", doc, "an object")
        for key, value in doc.pairs:
            name = _field(key, ("Data", "Checksum"))
            if name == "Data":
                self.data(value, raw)
            elif name == "Checksum" and value is not None:
                raw.checksum = self.uint(value, 64, "Checksum")
        return raw

    def uint(self, value: object, bits: int, path: str) -> int:
        number = _parse_int(value, signed=False, bits=bits) if isinstance(value, _Number) else None
        if number is None:
            raise _type_error(path, value, f"an unsigned {bits}-bit integer")
        return number

    def data(self, value: object, raw: _RawCheckpoint) -> None:
        if value is None:
            return
        if not isinstance(value, _Object):
            raise _type_error("Data", value, "an object")
        for key, item in value.pairs:
            name = _field(key, ("PodDeviceEntries", "RegisteredDevices"))
            if name == "PodDeviceEntries":
                raw.entries = self.entries(item, raw.entries)
            elif name == "RegisteredDevices":
                raw.registered = self.registered(item, raw.registered)

    def entries(self, value: object, current: list[_RawEntry] | None) -> list[_RawEntry] | None:
        path = "Data.PodDeviceEntries"
        if value is None:
            return None
        if not isinstance(value, list):
            raise _type_error(path, value, "an array of entries")
        old = current or []
        result = []
        for i, item in enumerate(value):
            entry = old[i] if i < len(old) else _RawEntry()
            self.entry(item, entry, f"{path}[{i}]")
            result.append(entry)
        return result

    def registered(
        self, value: object, current: dict[str, list[str] | None] | None
    ) -> dict[str, list[str] | None] | None:
        path = "Data.RegisteredDevices"
        if value is None:
            return None
        if not isinstance(value, _Object):
            raise _type_error(path, value, "an object mapping resource names to device IDs")
        result = {} if current is None else current
        for key, item in value.pairs:
            resource = self.string(key, "", path)
            result[resource] = self.strlist(item, None, f"{path}[{key!r}]")
        return result

    def entry(self, value: object, entry: _RawEntry, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, _Object):
            raise _type_error(path, value, "an object")
        for key, item in value.pairs:
            name = _field(key, ("PodUID", "ContainerName", "ResourceName", "DeviceIDs", "AllocResp"))
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
        if not isinstance(value, _Object):
            raise _type_error(path, value, "an object mapping NUMA node to device IDs")
        result = current if isinstance(current, dict) else {}
        for key, item in value.pairs:
            node = _parse_int(key, signed=True, bits=64)
            if node is None:
                raise CheckpointFormatError(f"{path}: NUMA node {key!r} is not a 64-bit integer")
            result[node] = self.strlist(item, None, f"{path}[{key!r}]")
        return result

    def alloc_resp(self, value: object, current: bytes | None, path: str) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, str) and not isinstance(value, _Number):
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
        raise _type_error(path, value, "a base64 string")


def _parse(raw: bytes) -> tuple[object, bool]:
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
            object_pairs_hook=_Object,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as err:
        raise CheckpointFormatError(
            f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:
        raise CheckpointFormatError("invalid JSON: nested too deeply") from None
    return doc, re.search(r"\\u[dD][89a-fA-F]", text) is not None


def _raw_spew(raw: _RawCheckpoint, v1: bool) -> bytes:
    return _spew(raw.entries, raw.registered, v1)


def _public(raw: _RawCheckpoint, version: int) -> DecodedCheckpoint:
    entries: list[PodDevicesEntry] | None = None
    if raw.entries is not None:
        entries = []
        for e in raw.entries:
            ids = e.device_ids
            device_ids: dict[int, list[str]] | None
            if version == 1:
                # §7.3: a v1 entry has no topology; the kubelet files its devices under NUMA node 0.
                device_ids = {0: list(ids) if isinstance(ids, list) else []}
            elif isinstance(ids, dict):
                device_ids = {node: devs or [] for node, devs in ids.items()}
            else:
                device_ids = None
            entries.append(
                PodDevicesEntry(e.pod_uid, e.container_name, e.resource_name, device_ids, e.alloc_resp)
            )
        if version == 1 and not entries:
            # The kubelet's conversion appends to a nil slice, so no v1 entries become nil.
            entries = None
    registered = None if raw.registered is None else {r: d or [] for r, d in raw.registered.items()}
    return DecodedCheckpoint(CheckpointData(entries, registered), raw.checksum, version)


@dataclass(frozen=True, slots=True)
class _Attempts:
    """The v2 reading of a file and, when that did not verify, the v1 reading."""

    v2: UnverifiedCheckpoint | None
    v2_error: CheckpointFormatError | None
    v1: UnverifiedCheckpoint | None


def _attempt(doc: object, scrub: bool, v1: bool) -> UnverifiedCheckpoint:
    raw = _Decoder(v1, scrub).checkpoint(doc)
    version = 1 if v1 else 2
    return UnverifiedCheckpoint(_public(raw, version), int(fnv_c.fnv1a_32(_raw_spew(raw, v1))))


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a whole file becomes objects.

    Decoding 10,000 entries makes ~100,000 objects, none of them in a cycle; the collector's passes over
    them were 40% of the start-up decode (restoring them into pod devices is the same). The pause is short
    and only defers collection.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _decode_attempts(raw: bytes) -> _Attempts:
    with collector_paused():
        return _decode_attempts_unpaused(raw)


def _decode_attempts_unpaused(raw: bytes) -> _Attempts:
    doc, scrub = _parse(raw)
    v2: UnverifiedCheckpoint | None = None
    v2_error: CheckpointFormatError | None = None
    try:
        v2 = _attempt(doc, scrub, v1=False)
    except CheckpointFormatError as err:
        v2_error = err
    if v2 is not None and v2.valid:
        return _Attempts(v2, None, None)
    v1: UnverifiedCheckpoint | None = None
    with contextlib.suppress(CheckpointFormatError):
        v1 = _attempt(doc, scrub, v1=True)
    return _Attempts(v2, v2_error, v1)


def decode(raw: bytes) -> DecodedCheckpoint:
    """Decode and verify a checkpoint file's bytes, v2 first and then the v1 fallback (§7.3).

    Raises CheckpointFormatError for bytes that are not a checkpoint and CorruptCheckpointError when the
    checksum does not hold; when neither format works the v2 error is raised, as the kubelet does.
    """
    attempts = _decode_attempts(raw)
    if attempts.v2 is not None and attempts.v2.valid:
        return attempts.v2.decoded
    if attempts.v1 is not None and attempts.v1.valid:
        return attempts.v1.decoded
    if attempts.v2_error is not None:
        raise attempts.v2_error
    assert attempts.v2 is not None
    raise CorruptCheckpointError(expected=attempts.v2.computed_checksum, found=attempts.v2.decoded.checksum)


def decode_unverified(raw: bytes) -> UnverifiedCheckpoint:
    """Decode a checkpoint without requiring its checksum to hold; for tools that show a damaged file.

    The reading that verifies wins; otherwise the v2 reading, or the v1 reading when only v1 types fit.
    Raises CheckpointFormatError when the bytes fit neither format.
    """
    attempts = _decode_attempts(raw)
    if attempts.v2 is not None and attempts.v2.valid:
        return attempts.v2
    if attempts.v1 is not None and (attempts.v1.valid or attempts.v2 is None):
        return attempts.v1
    if attempts.v2 is not None:
        return attempts.v2
    assert attempts.v2_error is not None
    raise attempts.v2_error


# --------------------------------------------------------------------------------------------------------
# Files


def read_file(path: Path) -> bytes:
    """Read a checkpoint file's bytes; every failure is a CheckpointError with the path in its message."""
    try:
        # O_NONBLOCK keeps a FIFO at the path from blocking the open; regular files ignore it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CheckpointNotFoundError(path) from None
    except OSError as err:
        raise CheckpointUnreadableError(f"cannot read {path}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = " (a directory)" if stat.S_ISDIR(info.st_mode) else ""
            raise CheckpointUnreadableError(f"cannot read {path}: not a regular file{kind}")
        if info.st_size > MAX_CHECKPOINT_BYTES:
            raise CheckpointFormatError(
                f"{path} is {info.st_size} bytes, over the {MAX_CHECKPOINT_BYTES}-byte checkpoint limit"
            )
        chunks = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > MAX_CHECKPOINT_BYTES:
                raise CheckpointFormatError(
                    f"{path} grew past the {MAX_CHECKPOINT_BYTES}-byte checkpoint limit while being read"
                )
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as err:
        raise CheckpointUnreadableError(f"cannot read {path}: {err.strerror or err}") from None
    finally:
        os.close(fd)


_VALID_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,250}")
#: What _create_temp names its files.
_TEMP_NAME: Final = re.compile(r"\.\d+")


#: How many buffers one writev may take (IOV_MAX; POSIX guarantees at least 16, Linux has 1024).
_IOV_MAX: Final = max(16, os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16)


def _write_all(fd: int, pieces: list[bytes]) -> None:
    """Write the pieces in order with writev: a multi-MiB file is never joined into one copy first."""
    for start in range(0, len(pieces), _IOV_MAX):
        batch = pieces[start : start + _IOV_MAX]
        written = os.writev(fd, batch)
        wanted = sum(map(len, batch))
        if written < wanted:
            # A short write (a full disk, a signal): finish this batch from where it stopped.
            rest = memoryview(b"".join(batch))[written:]
            while rest:
                rest = rest[os.write(fd, rest) :]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointStore:
    """The checkpoint file in one directory: read it, write it durably and atomically, set it aside.

    Blocking: callers on the event loop run these methods with ``asyncio.to_thread``.

    ``fault`` is a test hook, not configuration: when given, ``write`` calls it with each stage name of
    :data:`WRITE_STAGES` ("after-temp-write", "after-fsync", "after-rename") so a crash-consistency harness
    can kill the process at that point. An exception raised by the hook is handled like any write error.
    """

    def __init__(
        self,
        directory: Path,
        name: str = CHECKPOINT_NAME,
        *,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        if not _VALID_NAME.fullmatch(name) or name.startswith("."):
            raise ValueError(
                f"invalid checkpoint name {name!r}: "
                "want 1-250 letters, digits, '_', '-' or '.', not starting with '.'"
            )
        self._directory = Path(directory)
        self._name = name
        self._fault = fault

    @property
    def path(self) -> Path:
        return self._directory / self._name

    def read(self) -> DecodedCheckpoint:
        """Read and verify the file.

        Raises CheckpointNotFoundError, CheckpointFormatError (CheckpointUnreadableError when the path
        cannot be read at all) or CorruptCheckpointError.
        """
        return decode(read_file(self.path))

    def write(
        self, data: CheckpointData, encoder: Callable[[CheckpointData], bytes | list[bytes]] = encode
    ) -> None:
        """Replace the file with ``data``: temp file, fsync, rename, directory fsync.

        A crash at any point leaves either the old file or the new one, never a mix. On error the temp file
        is removed and CheckpointError is raised. ``data`` is a snapshot: its lists must not change while
        the write runs in its thread. ``encoder`` must give :func:`encode`'s bytes, whole or as pieces
        written in order; a writer of successive checkpoints passes one that remembers the previous write
        (``CheckpointEncoder.encode_pieces``).
        """
        try:
            self._write(encoder(data))
        except CheckpointError:
            raise
        except Exception as err:
            raise CheckpointError(f'failed to write checkpoint file "{self._name}": {err}') from err

    def _write(self, blob: bytes | list[bytes]) -> None:
        directory = self._directory
        if not directory.is_dir():
            directory.mkdir(mode=0o750, parents=True, exist_ok=True)
            # mkdir's mode is filtered by the umask; the device plugin directory must be exactly 0750.
            os.chmod(directory, 0o750)
        temp, fd = self._create_temp()
        try:
            try:
                _write_all(fd, [blob] if isinstance(blob, bytes) else blob)
                self._stage("after-temp-write")
                os.fsync(fd)
                self._stage("after-fsync")
            finally:
                os.close(fd)
            os.replace(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self._stage("after-rename")
        _fsync_directory(directory)

    def _create_temp(self) -> tuple[Path, int]:
        # Like Go's os.CreateTemp(dir, "."): a dot name (hidden from checkpoint listings) with random digits.
        for _ in range(10000):
            temp = self._directory / f".{secrets.randbelow(1 << 32)}"
            try:
                return temp, os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
        raise FileExistsError(f"no free temporary file name in {self._directory}")

    def remove_stale_temp_files(self) -> list[str]:
        """Delete the temporary files of writes a crash cut short; returns their names.

        A process killed between creating its temp file and renaming it leaves the file behind, and the
        kubelet never removes them; after enough crashes they would fill the directory. Call this only
        while no write can run (at start, before the first write).
        """
        removed: list[str] = []
        for entry in os.scandir(self._directory):
            if _TEMP_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
        return removed

    def _stage(self, stage: str) -> None:
        if self._fault is not None:
            self._fault(stage)

    def quarantine(self) -> Path:
        """Move the current file aside as ``<name>.corrupt-<UTC timestamp>`` and return its new path.

        The kubelet leaves a bad file to be overwritten; keeping a copy lets a person see what went wrong.
        """
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        target = self._directory / f"{self._name}.corrupt-{stamp}"
        suffix = 0
        while target.exists() or target.is_symlink():
            suffix += 1
            target = self._directory / f"{self._name}.corrupt-{stamp}-{suffix}"
        try:
            os.rename(self.path, target)
        except FileNotFoundError:
            raise CheckpointNotFoundError(self.path) from None
        except OSError as err:
            raise CheckpointError(f"cannot quarantine {self.path}: {err.strerror or err}") from None
        _fsync_directory(self._directory)
        return target
