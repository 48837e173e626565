"""The kubelet's device-manager checkpoint as the exporter sees it: does it verify, what does it hold.

Read in a worker thread (the file can be MiBs) and decoded again only when its inode, size or mtime
changed: 10,000 entries take a tenth of a second to decode, the stat a few microseconds.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kubedevice.checkpoint import (
    CheckpointError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CheckpointUnreadableError,
    CorruptCheckpointError,
    PodDevicesEntry,
    decode_unverified,
    read_file,
)


class CheckpointState(enum.StrEnum):
    VERIFIED = "verified"  # the checksum holds: the kubelet would restore it
    CORRUPT = "corrupt"  # decodes, but the checksum does not hold: the kubelet would start empty
    MALFORMED = "malformed"  # not a checkpoint at all (bad JSON, wrong types)
    UNREADABLE = "unreadable"  # no permission, a directory, an I/O error
    MISSING = "missing"  # no file (a node that never allocated, or the wrong path mounted)


@dataclass(frozen=True, slots=True)
class CheckpointAllocation:
    """One device of one checkpoint entry."""

    pod_uid: str
    container: str
    resource: str
    device: str


@dataclass(frozen=True, slots=True)
class CheckpointReport:
    path: str
    state: CheckpointState
    #: One line saying what is wrong; None when the file verifies.
    message: str | None = None
    #: PodDeviceEntries in the file (also for a corrupt file, whose content still decodes).
    entries: int | None = None
    #: The file's mtime (seconds since the epoch).
    modified: float | None = None
    format_version: int | None = None
    #: The allocations of a verified file; a corrupt one is not trusted for them.
    allocations: tuple[CheckpointAllocation, ...] = ()


def _allocations(entries: Iterable[PodDevicesEntry]) -> tuple[CheckpointAllocation, ...]:
    out: list[CheckpointAllocation] = []
    for e in entries:
        seen: set[str] = set()
        for ids in (e.device_ids or {}).values():
            for device in ids or ():
                if device not in seen:
                    seen.add(device)
                    out.append(CheckpointAllocation(e.pod_uid, e.container_name, e.resource_name, device))
    return tuple(out)


def read_report(path: str) -> CheckpointReport:
    """Read and judge the file; never raises for what is in or at the path."""
    try:
        info = os.stat(path)
        raw = read_file(Path(path))
    except FileNotFoundError:
        return CheckpointReport(path, CheckpointState.MISSING, f"no checkpoint at {path}")
    except CheckpointNotFoundError as err:
        return CheckpointReport(path, CheckpointState.MISSING, str(err))
    except CheckpointUnreadableError as err:
        return CheckpointReport(path, CheckpointState.UNREADABLE, str(err))
    except OSError as err:
        return CheckpointReport(
            path, CheckpointState.UNREADABLE, f"cannot read {path}: {err.strerror or err}"
        )
    except CheckpointError as err:
        return CheckpointReport(path, CheckpointState.MALFORMED, str(err), modified=info.st_mtime)
    try:
        unverified = decode_unverified(raw)
    except CheckpointFormatError as err:
        return CheckpointReport(path, CheckpointState.MALFORMED, str(err), modified=info.st_mtime)
    decoded = unverified.decoded
    entries = decoded.data.pod_device_entries or []
    if not unverified.valid:
        message = str(CorruptCheckpointError(unverified.computed_checksum, decoded.checksum))
        return CheckpointReport(
            path, CheckpointState.CORRUPT, message, len(entries), info.st_mtime, decoded.format_version
        )
    return CheckpointReport(
        path,
        CheckpointState.VERIFIED,
        None,
        len(entries),
        info.st_mtime,
        decoded.format_version,
        _allocations(entries),
    )


class CheckpointProbe:
    """`read()` (blocking: call it in a thread) returns the last report while the file is unchanged."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int, int, int] | None = None
        self._report: CheckpointReport | None = None

    def read(self) -> CheckpointReport:
        try:
            info = os.stat(self.path)
            stamp: tuple[int, int, int, int] | None = (
                info.st_dev,
                info.st_ino,
                info.st_size,
                info.st_mtime_ns,
            )
        except OSError:
            stamp = None
        if stamp is not None and stamp == self._stamp and self._report is not None:
            return self._report
        self._report = read_report(self.path)
        self._stamp = stamp
        return self._report


def stale_allocations(
    report: CheckpointReport, held: Mapping[str, set[str]]
) -> tuple[CheckpointAllocation, ...]:
    """Allocations of pods of which PodResources lists no device at all.

    PodResources names pods, the checkpoint has their UIDs: a pod is live when any of its devices is held
    by a listed container. Matching by pod, not by container, keeps a plain init container's devices
    (checkpointed, but not listed by the kubelet) from counting as stale while its pod runs.
    """
    live = {a.pod_uid for a in report.allocations if a.device in held.get(a.resource, ())}
    return tuple(a for a in report.allocations if a.pod_uid not in live)
