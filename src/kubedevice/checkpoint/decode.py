"""Decoding a checkpoint file's bytes: v2 first, then the pre-1.20 v1 format, with or without the checksum."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass

import fnv_c

from kubedevice.checkpoint.errors import CheckpointFormatError, CorruptCheckpointError
from kubedevice.checkpoint.json_reader import Decoder, RawCheckpoint, parse_json
from kubedevice.checkpoint.model import (
    CheckpointData,
    DecodedCheckpoint,
    PodDevicesEntry,
    UnverifiedCheckpoint,
)
from kubedevice.checkpoint.spew import spew_document


def _raw_spew(raw: RawCheckpoint, v1: bool) -> bytes:
    return spew_document(raw.entries, raw.registered, v1)


def _public(raw: RawCheckpoint, version: int) -> DecodedCheckpoint:
    entries: list[PodDevicesEntry] | None = None
    if raw.entries is not None:
        entries = []
        for e in raw.entries:
            if isinstance(e, PodDevicesEntry):
                entries.append(e)  # the kubelet's own shape, decoded straight into its final form
                continue
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
    raw = Decoder(v1, scrub).checkpoint(doc)
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
    doc, scrub = parse_json(raw)
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
