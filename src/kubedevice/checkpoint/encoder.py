"""Encoding successive checkpoints without redoing the entries that did not change.

The manager rewrites the whole checkpoint after every admission, as the kubelet does, and the file must
stay byte for byte what :func:`kubedevice.checkpoint.encode` gives. Re-encoding every entry each
time makes admission cost grow with the number of pods (the kubelet's own 10,000-pod run slows from 124
to 16 pods/s for that reason). Between two writes the entries usually differ only at the end (a new pod
is appended), so this encoder keeps, for the entries of the previous write, their JSON fragments and the
FNV-1a state of the checksum text after each of them; a new write re-encodes only the entries from the
first one that differs, and the rest is C-level joins and a hash continued from the saved state.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import fnv_c
import fnv_c.ext

from kubedevice.checkpoint.json_writer import NEEDS_ESCAPE, encode, json_entry, json_str, json_strlist
from kubedevice.checkpoint.model import CheckpointData, PodDevicesEntry
from kubedevice.checkpoint.spew import (
    SPEW_HEAD,
    SPEW_REG,
    spew_bytes_each,
    spew_device_ids,
    spew_strlist,
    utf8,
)

_FNV1A_32_INIT: Final = 0x811C9DC5
_FNV_32_PRIME: Final = 0x01000193


def _load_continued_fnv1a() -> Callable[[int, bytes], int] | None:
    """FNV-1a 32 continued from a given state, in C.

    fnv_c's public functions always start from the offset basis; its shared library also exports the
    underlying `_fnv_32(data, len, init, prime, variant)`, which takes the state to start from. Without it
    (another fnv_c build) the encoder hashes the whole text, still in C.
    """
    try:
        lib = ctypes.CDLL(fnv_c.ext._fnv.__file__)
        func = lib._fnv_32
    except (OSError, AttributeError):
        return None
    func.restype = ctypes.c_uint32
    func.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_int]
    if func(b"kubelet", 7, _FNV1A_32_INIT, _FNV_32_PRIME, 1) != fnv_c.fnv1a_32(b"kubelet"):
        return None

    def continued(state: int, data: bytes) -> int:
        return int(func(data, len(data), state, _FNV_32_PRIME, 1))

    return continued


_CONTINUED_FNV1A: Final = _load_continued_fnv1a()


def _spew_entry(e: PodDevicesEntry, response: str) -> bytes:
    return utf8(
        f"{{PodUID:(string){e.pod_uid} ContainerName:(string){e.container_name}"
        f" ResourceName:(string){e.resource_name} DeviceIDs:{spew_device_ids(e.device_ids, False)}"
        f" AllocResp:([]uint8){response}}}"
    )


@dataclass(slots=True)
class _Encoded:
    """The previous write's entries with their fragments (same order, same length)."""

    entries: list[PodDevicesEntry] = field(default_factory=list)
    #: Each entry's JSON with the separator before it: "[" for the first entry, "," for the others.
    json: list[bytes] = field(default_factory=list)
    #: `json` joined by runs of `chunk` entries, for the complete runs only: the file is written from
    #: these few large pieces instead of one join of every entry per write.
    chunks: list[bytes] = field(default_factory=list)
    #: FNV-1a state of the checksum text up to and including each entry's spew fragment.
    states: list[int] = field(default_factory=list)
    registered: dict[str, list[str] | None] | None = None
    #: The mapping the previous call was handed: handed again, it is taken as unchanged.
    registered_source: Mapping[str, Sequence[str] | None] | None = None
    registered_json: bytes = b"null"
    registered_spew: bytes = b"<nil>"


_JSON_HEAD: Final = b'{"Data":{"PodDeviceEntries":'
_SPEW_HEAD_OPEN: Final = (SPEW_HEAD + "[").encode()
_SPEW_TAIL_REG: Final = ("]" + SPEW_REG).encode()
_SPEW_HEAD_NIL: Final = (SPEW_HEAD + "<nil>").encode()
_SPEW_REG_BYTES: Final = SPEW_REG.encode()

#: Entries per joined chunk: 10,000 pods make ~40 pieces, each joined once.
CHUNK_ENTRIES: Final = 256


class CheckpointEncoder:
    """`encode()` with memory: the same bytes as :func:`checkpoint.encode`, at the cost of what changed.

    Entries are matched by identity (or equality) with the previous call's, so callers should hand the
    same PodDevicesEntry objects for unchanged entries. The registered devices are compared by value,
    unless the very mapping of the previous call is handed again: callers must then not have changed
    it (the manager builds a new one whenever devices change). Thread-safe: writes run in worker threads.
    """

    def __init__(self, chunk_entries: int = CHUNK_ENTRIES) -> None:
        if chunk_entries < 1:
            raise ValueError(f"chunk_entries must be at least 1, got {chunk_entries}")
        self._chunk = chunk_entries
        self._lock = threading.Lock()
        self._last = _Encoded()

    def encode(self, data: CheckpointData) -> bytes:
        return b"".join(self.encode_pieces(data))

    def encode_pieces(self, data: CheckpointData) -> list[bytes]:
        """`encode(data)` as pieces to write in order (no copy of the whole file is made)."""
        if _CONTINUED_FNV1A is None:
            return [encode(data)]
        with self._lock:
            try:
                return self._encode(data.pod_device_entries, data.registered_devices, _CONTINUED_FNV1A)
            except BaseException:
                self._last = _Encoded()  # its lists may be cut short: start over next time
                raise

    def _encode(
        self,
        entries: Sequence[PodDevicesEntry] | None,
        registered: Mapping[str, Sequence[str] | None] | None,
        fnv: Callable[[int, bytes], int],
    ) -> list[bytes]:
        last = self._last
        size = self._chunk
        keep = _common_prefix(last.entries, entries or [])
        # The previous write's lists are cut in place: this call replaces them.
        json_parts, chunks, states = last.json, last.chunks, last.states
        del json_parts[keep:], chunks[keep // size :], states[keep:]
        if entries is None:
            # Go's nil slice (nothing allocated yet): no entries to remember.
            state = fnv(_FNV1A_32_INIT, _SPEW_HEAD_NIL)
            entries_json, spew_close = [b"null"], _SPEW_REG_BYTES
        else:
            state = states[-1] if states else fnv(_FNV1A_32_INIT, _SPEW_HEAD_OPEN)
            # The first write after a restart encodes every entry: their responses are rendered at once.
            responses = spew_bytes_each([e.alloc_resp for e in entries[keep:]])
            for i in range(keep, len(entries)):
                e = entries[i]
                json_parts.append((b"," if i else b"[") + utf8(json_entry(e)))
                spew = _spew_entry(e, responses[i - keep])
                state = fnv(state, b" " + spew if i else spew)
                states.append(state)
            for c in range(len(chunks), len(json_parts) // size):
                chunks.append(b"".join(json_parts[c * size : (c + 1) * size]))
            entries_json = [*chunks, *json_parts[len(chunks) * size :], b"]" if json_parts else b"[]"]
            spew_close = _SPEW_TAIL_REG
        remembered = last.registered
        if registered is None:
            reg_json, reg_spew = b"null", b"<nil>"
        elif registered is last.registered_source or (remembered is not None and registered == remembered):
            reg_json, reg_spew = last.registered_json, last.registered_spew
        else:
            remembered = {r: None if ids is None else list(ids) for r, ids in registered.items()}
            reg_json = utf8(
                "{"
                + ",".join([f"{json_str(r)}:{_ids_json(registered[r])}" for r in sorted(registered)])
                + "}"
            )
            reg_spew = utf8(
                "map[" + " ".join([f"{r}:{spew_strlist(registered[r])}" for r in sorted(registered)]) + "]"
            )
        checksum = fnv(fnv(fnv(state, spew_close), reg_spew), b"}")
        self._last = _Encoded(
            list(entries or []),
            json_parts,
            chunks,
            states,
            remembered if registered is not None else None,
            registered,
            reg_json,
            reg_spew,
        )
        return [
            _JSON_HEAD,
            *entries_json,
            b',"RegisteredDevices":',
            reg_json,
            b'},"Checksum":' + str(checksum).encode() + b"}",
        ]


def _ids_json(ids: Sequence[str] | None) -> str:
    """`json_strlist`, with one escape check over all IDs: 10^5 plain IDs are one C-level join."""
    if ids is None or NEEDS_ESCAPE.search("".join(ids)) is not None:
        return json_strlist(ids)
    return '["' + '","'.join(ids) + '"]' if ids else "[]"


def _common_prefix(old: Sequence[PodDevicesEntry], new: Sequence[PodDevicesEntry]) -> int:
    """How many leading entries `new` shares with `old` (by identity, else by value)."""
    n = min(len(old), len(new))
    if old[:n] == new[:n]:  # the usual case: only appended; a C-level comparison, identity first
        return n
    same = list(map(operator.eq, old[:n], new[:n]))
    return same.index(False)
