"""The DRA manager's checkpoint file (`dra_manager_state`) as bytes, byte-compatible with the kubelet.

The file is Go's ``json.Marshal`` of ``{Data string; Checksum uint32}``: ``Data`` is the claim-info cache
as JSON text held in a JSON string, and ``Checksum`` is the CRC-32 (IEEE) of exactly that string's bytes.
This is not the device manager's FNV-1a-over-go-spew scheme: the text hashed is the text stored, so a reader
verifies the string as found, whatever its whitespace or key order.

We write what the newest kubelet writes: ``ClaimInfoStateList`` (never the v1.31 ``Entries``, which is
still read), ``ShareID`` in every device (``null`` when there is none), and, where the kubelet's order is
Go's random map order, the claims sorted by ``"<namespace>/<name>"``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Final

from kubedevice.checkpoint.dra_model import ClaimInfoState, DRACheckpointData, DRADevice
from kubedevice.checkpoint.dra_reader import DRAReader, InnerDocument
from kubedevice.checkpoint.errors import CheckpointFormatError, CorruptDRACheckpointError
from kubedevice.checkpoint.json_reader import (
    JSONNumber,
    JSONObject,
    match_field,
    parse_int,
    parse_json,
    type_error,
)
from kubedevice.checkpoint.json_writer import json_str, json_strlist
from kubedevice.checkpoint.spew import utf8

_HEAD: Final = '{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":'


def _device_json(device: DRADevice) -> str:
    share = "null" if device.share_id is None else json_str(device.share_id)
    return (
        f'{{"PoolName":{json_str(device.pool_name)},"DeviceName":{json_str(device.device_name)}'
        f',"ShareID":{share},"RequestNames":{json_strlist(device.request_names)}'
        f',"CDIDeviceIDs":{json_strlist(device.cdi_device_ids)}}}'
    )


def _claim_json(claim: ClaimInfoState) -> str:
    # Go writes map keys sorted by their bytes; code-point order is the same order for UTF-8.
    if claim.pod_uids is None:
        pods = "null"
    else:
        pods = "{" + ",".join([json_str(uid) + ":{}" for uid in sorted(claim.pod_uids)]) + "}"
    state = claim.driver_state
    if state is None:
        drivers = "null"
    else:
        parts = []
        for name in sorted(state):
            devices = state[name]
            listed = "null" if devices is None else "[" + ",".join([_device_json(d) for d in devices]) + "]"
            parts.append(f'{json_str(name)}:{{"Devices":{listed}}}')
        drivers = "{" + ",".join(parts) + "}"
    return (
        f'{{"ClaimUID":{json_str(claim.claim_uid)},"ClaimName":{json_str(claim.claim_name)}'
        f',"Namespace":{json_str(claim.namespace)},"PodUIDs":{pods},"DriverState":{drivers}}}'
    )


def encode_dra_data(data: DRACheckpointData) -> bytes:
    """The inner document (the ``Data`` string's bytes) as the kubelet's ``json.Marshal`` writes it."""
    if data.claims is None:
        listed = "null"
    else:
        ordered = sorted(data.claims, key=lambda claim: claim.key)
        listed = "[" + ",".join([_claim_json(claim) for claim in ordered]) + "]"
    return utf8(_HEAD + listed + "}")


def _escape(inner: bytes) -> bytes:
    # Go escapes the inner text again as a string. The inner JSON already holds every character Go escapes
    # as an escape (control characters, <, >, &, U+2028, U+2029) except its own quotes and backslashes, so
    # those two are all there is to escape; two replaces are ~15x faster than json_str's general pass.
    return inner.replace(b"\\", b"\\\\").replace(b'"', b'\\"')


#: One claim's part of the file: its inner JSON (what the checksum covers) and that text escaped as the
#: outer document holds it. A writer of successive checkpoints keeps each claim's piece until it changes.
ClaimPiece = tuple[bytes, bytes]


def encode_claim_piece(claim: ClaimInfoState) -> ClaimPiece:
    inner = utf8(_claim_json(claim))
    return inner, _escape(inner)


_LIST_HEAD: Final = utf8(_HEAD + "[")
_FILE_HEAD: Final = b'{"Data":"' + _escape(_LIST_HEAD)


def encode_dra_pieces(pieces: list[ClaimPiece]) -> list[bytes]:
    """The whole file, as the pieces to write in order, for claims already encoded and sorted by key.

    Only the checksum is computed over every claim's text, incrementally and in C, so a write of a large
    cache costs about the claims that changed since the previous one.
    """
    inner = b",".join([piece[0] for piece in pieces])
    crc = zlib.crc32(b"]}", zlib.crc32(inner, zlib.crc32(_LIST_HEAD)))
    escaped = b",".join([piece[1] for piece in pieces])
    return [_FILE_HEAD, escaped, b']}","Checksum":' + str(crc).encode() + b"}"]


def encode_dra(data: DRACheckpointData) -> bytes:
    """The whole ``dra_manager_state`` file, byte for byte as the kubelet writes it (no trailing newline)."""
    if data.claims is not None:
        ordered = sorted(data.claims, key=lambda claim: claim.key)
        return b"".join(encode_dra_pieces([encode_claim_piece(claim) for claim in ordered]))
    inner = encode_dra_data(data)
    return b'{"Data":"' + _escape(inner) + b'","Checksum":' + str(zlib.crc32(inner)).encode() + b"}"


@dataclass(frozen=True, slots=True)
class UnverifiedDRACheckpoint:
    """A DRA checkpoint decoded without trusting its checksum, for inspection tools."""

    data: DRACheckpointData
    #: The checksum as found in the file.
    checksum: int
    #: The CRC-32 of the ``Data`` string as found.
    computed_checksum: int
    #: ``ClaimInfoStateList``, ``Entries`` (a v1.31 file), or None when the document has neither.
    list_key: str | None

    @property
    def valid(self) -> bool:
        return self.checksum == self.computed_checksum


@dataclass(frozen=True, slots=True)
class _Outer:
    data: bytes
    checksum: int

    @property
    def computed_checksum(self) -> int:
        return zlib.crc32(self.data)


def _outer(doc: object) -> _Outer:
    """Go's reading of ``{Data string; Checksum uint32}``: fields matched case-insensitively, others ignored.

    So a file without ``Data`` reads as an empty string, whose CRC-32 is 0: the pre-1.31 format
    (``{"version":...,"entries":...,"checksum":N}``) fails its checksum like any corrupt file.
    """
    data, checksum = "", 0
    if doc is None:
        return _Outer(b"", 0)  # null into a struct changes nothing
    if not isinstance(doc, JSONObject):
        raise type_error("checkpoint", doc, "an object")
    for key, value in doc.pairs:
        name = match_field(key, ("Data", "Checksum"))
        if name is None or value is None:
            continue
        if name == "Data":
            if not isinstance(value, str) or isinstance(value, JSONNumber):
                raise type_error("Data", value, "a string")
            data = value
        else:
            number = parse_int(value, signed=False, bits=32) if isinstance(value, JSONNumber) else None
            if number is None:
                raise type_error("Checksum", value, "an unsigned 32-bit integer")
            checksum = number
    # Go replaces an escaped lone surrogate with U+FFFD; utf8() does the same.
    return _Outer(utf8(data), checksum)


def _read_outer(raw: bytes) -> _Outer:
    doc, _ = parse_json(raw)
    return _outer(doc)


def _inner(outer: _Outer) -> InnerDocument:
    if not outer.data:
        # Go: "unexpected end of JSON input".
        raise CheckpointFormatError("Data: invalid JSON: the string is empty")
    try:
        doc, scrub = parse_json(outer.data)
    except CheckpointFormatError as err:
        raise CheckpointFormatError(f"Data: {err}") from None
    return DRAReader(scrub).document(doc)


def decode_dra(raw: bytes) -> DRACheckpointData:
    """Decode and verify a ``dra_manager_state`` file's bytes, in the kubelet's order.

    Raises CheckpointFormatError when the file is not JSON of the outer shape, CorruptDRACheckpointError
    (``checkpoint is corrupted``) when the CRC-32 of ``Data`` is not ``Checksum``, and CheckpointFormatError
    again when ``Data`` is not the inner document. ``ClaimInfoStateList`` is read, or ``Entries`` (v1.31) in
    a file without it; unknown keys (``ShareID`` for older kubelets) are ignored as Go ignores them.
    """
    outer = _read_outer(raw)
    computed = outer.computed_checksum
    if computed != outer.checksum:
        raise CorruptDRACheckpointError(expected=computed, found=outer.checksum)
    return _inner(outer).data


def decode_dra_unverified(raw: bytes) -> UnverifiedDRACheckpoint:
    """Decode a DRA checkpoint without requiring its checksum to hold; for tools that show a damaged file.

    Raises CheckpointFormatError when the outer or the inner document cannot be decoded.
    """
    outer = _read_outer(raw)
    inner = _inner(outer)
    return UnverifiedDRACheckpoint(inner.data, outer.checksum, outer.computed_checksum, inner.list_key)


def is_dra_checkpoint(raw: bytes) -> bool:
    """Whether the bytes are a DRA checkpoint by their content: a JSON object whose ``Data`` is a string
    (the device manager's checkpoint has an object there), or the pre-1.31 DRA format (``version`` and
    ``entries``, no ``Data``), which then fails its checksum as the kubelet's reader fails it.

    False for anything that is not JSON.
    """
    try:
        doc, _ = parse_json(raw)
    except CheckpointFormatError:
        return False
    if not isinstance(doc, JSONObject):
        return False
    keys = {match_field(key, ("Data", "version", "entries")): value for key, value in doc.pairs}
    if "Data" in keys:
        data = keys["Data"]
        return isinstance(data, str) and not isinstance(data, JSONNumber)
    return "version" in keys and "entries" in keys
