"""The SDK's record of prepared claims: what makes prepare and unprepare idempotent.

One JSON file per driver, ``{"version": 1, "claims": {<uid>: {namespace, name, devices, cdi_spec_files,
boot_id}}}``, where ``devices`` are the wire form of the answer. It is written (temporary file, fsync,
rename) before an answer leaves, and read again at the start of every serialised call, so the two
instances of a rolling update, which share the file under one lock, answer alike.

An unreadable file is never taken as empty: prepare would then run the hooks again for claims whose
hardware is already set up.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedevice.atomic_file import write_atomic
from kubedevice.plugin.errors import ConfigError

STATE_VERSION = 1
_BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")


class StateFileError(ConfigError):
    """The state file cannot be read or understood; the message names the file and what to do."""


@dataclass(frozen=True)
class PreparedClaim:
    namespace: str
    name: str
    #: The answer's devices in wire form: request_names, pool_name, device_name, cdi_device_ids (share_id).
    devices: tuple[Mapping[str, Any], ...]
    cdi_spec_files: tuple[str, ...]
    boot_id: str
    #: What the SDK wrote into each of its CDI spec files, to write a missing one again without the hook.
    cdi_specs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "devices": [dict(d) for d in self.devices],
            "cdi_spec_files": list(self.cdi_spec_files),
            "boot_id": self.boot_id,
            "cdi_specs": {f: dict(s) for f, s in self.cdi_specs.items()},
        }


@dataclass
class ClaimState:
    claims: dict[str, PreparedClaim] = field(default_factory=dict)


def read_boot_id(path: Path = _BOOT_ID_FILE) -> str:
    """This boot's ID; a missing file (not Linux) reads as one unchanging boot."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def load_state(path: Path) -> ClaimState:
    """Read the state file; a missing file is an empty state, anything unreadable raises StateFileError."""
    what_to_do = "move it aside once no claim of this driver is prepared on the node, or restore it"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ClaimState()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise StateFileError(f"{path}: cannot read the DRA state ({reason}) — {what_to_do}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StateFileError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}) — {what_to_do}"
        ) from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        version = data.get("version") if isinstance(data, dict) else None
        raise StateFileError(
            f"{path}: unknown DRA state version {version!r} (this SDK reads {STATE_VERSION}) — {what_to_do}"
        )
    try:
        claims = {
            str(uid): PreparedClaim(
                namespace=str(entry["namespace"]),
                name=str(entry["name"]),
                devices=tuple(dict(d) for d in entry["devices"]),
                cdi_spec_files=tuple(str(f) for f in entry["cdi_spec_files"]),
                boot_id=str(entry["boot_id"]),
                cdi_specs={str(f): dict(s) for f, s in (entry.get("cdi_specs") or {}).items()},
            )
            for uid, entry in data["claims"].items()
        }
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise StateFileError(f"{path}: malformed DRA state (at {exc}) — {what_to_do}") from None
    return ClaimState(claims)


def save_state(path: Path, state: ClaimState) -> None:
    """Write atomically and durably: temporary file, fsync, rename, fsync of the folder."""
    data = {
        "version": STATE_VERSION,
        "claims": {uid: entry.to_json() for uid, entry in sorted(state.claims.items())},
    }
    # dumps without indent: json's C encoder serves only that; the whole state is written at every call.
    write_atomic(path, json.dumps(data, sort_keys=True) + "\n", sync_folder=True)


class CallLock:
    """One prepare or unprepare at a time: an asyncio lock, plus a file lock when instances share the state.

    The file lock is taken in a thread (flock blocks), never on the event loop.
    """

    def __init__(self, lock_file: Path | None) -> None:
        self._lock = asyncio.Lock()
        self._lock_file = lock_file

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        async with self._lock:
            if self._lock_file is None:
                yield
                return
            taking = asyncio.ensure_future(asyncio.to_thread(_flock, self._lock_file))
            try:
                fd = await asyncio.shield(taking)
            except asyncio.CancelledError:
                # The thread goes on and may still get the lock: release it then, or the other
                # instance of a rolling update would wait forever.
                taking.add_done_callback(_close_when_taken)
                raise
            try:
                yield
            finally:
                os.close(fd)  # closing the descriptor releases the flock


def _flock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _close_when_taken(taking: asyncio.Future[int]) -> None:
    if not taking.cancelled() and taking.exception() is None:
        os.close(taking.result())
