"""The SDK's record of prepared claims: what makes prepare and unprepare idempotent.

One JSON file per driver, ``{"version": 1, "claims": {<uid>: {namespace, name, devices, cdi_spec_files,
boot_id}}}``, where ``devices`` are the wire form of the answer. It is written (kubedevice.durable:
temporary file, fsync, rename, folder fsync) before an answer leaves. Each serialised call starts from
the state this instance last wrote, unless the file changed since (another inode, size or mtime): then it
is read again, so the two instances of a rolling update, which share the file under one lock, answer
alike. Each claim's JSON is kept until the
claim changes, so a write encodes only what changed (a burst of prepares must not cost O(claims) each).

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

from kubedevice.durable import replace_file
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


_WHAT_TO_DO = "move it aside once no claim of this driver is prepared on the node, or restore it"

#: What tells one version of the file from another: inode, size, mtime (None: no file).
Stamp = tuple[int, int, int]


def load_state(path: Path) -> ClaimState:
    """Read the state file; a missing file is an empty state, anything unreadable raises StateFileError."""
    return _read(path)[0]


def _read(path: Path) -> tuple[ClaimState, Stamp | None]:
    """The state and the stamp of the very file it was read from."""
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            text = handle.read().decode("utf-8")
    except FileNotFoundError:
        return ClaimState(), None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise StateFileError(f"{path}: cannot read the DRA state ({reason}) — {_WHAT_TO_DO}") from None
    return _parse(path, text), (info.st_ino, info.st_size, info.st_mtime_ns)


def _parse(path: Path, text: str) -> ClaimState:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StateFileError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}) — {_WHAT_TO_DO}"
        ) from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        version = data.get("version") if isinstance(data, dict) else None
        raise StateFileError(
            f"{path}: unknown DRA state version {version!r} (this SDK reads {STATE_VERSION}) — {_WHAT_TO_DO}"
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
        raise StateFileError(f"{path}: malformed DRA state (at {exc}) — {_WHAT_TO_DO}") from None
    return ClaimState(claims)


def _stamp(path: Path) -> Stamp | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


class StateStore:
    """The state file of one instance, kept in memory between calls. Blocking: call it on a thread, with
    the call lock held (so no other writer runs between a load and the save that follows it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: The claims as the file held them at `_stamp`; None: read the file at the next load.
        self._claims: dict[str, PreparedClaim] | None = None
        self._stamp: Stamp | None = None
        #: uid -> the entry and its `"<uid>": {...}` text, as json.dumps(sort_keys=True) writes it.
        self._texts: dict[str, tuple[PreparedClaim, str]] = {}

    def load(self) -> ClaimState:
        """The state, read again only when the file is not the one this instance last read or wrote.
        The caller gets its own copy of the claims: a call that fails or is cancelled before its save
        leaves the kept state as the file has it."""
        if self._claims is None or _stamp(self.path) != self._stamp:
            state, self._stamp = _read(self.path)
            self._claims = state.claims
        return ClaimState(dict(self._claims))

    def save(self, state: ClaimState) -> None:
        """Write atomically and durably (temporary file, fsync, rename, fsync of the folder), in the
        layout json.dumps({"version": 1, "claims": ...}, sort_keys=True) gives."""
        claims = ", ".join(self._encode(state.claims))
        body = f'{{"claims": {{{claims}}}, "version": {STATE_VERSION}}}\n'
        self._claims = None  # unknown until the write is done: a failed write leaves either file
        replace_file(self.path, body)
        self._claims, self._stamp = dict(state.claims), _stamp(self.path)

    def _encode(self, claims: Mapping[str, PreparedClaim]) -> list[str]:
        texts: dict[str, tuple[PreparedClaim, str]] = {}
        for uid, entry in claims.items():
            known = self._texts.get(uid)
            if known is None or (known[0] is not entry and known[0] != entry):
                known = (entry, f"{json.dumps(uid)}: {json.dumps(entry.to_json(), sort_keys=True)}")
            texts[uid] = known
        self._texts = texts
        return [texts[uid][1] for uid in sorted(texts)]


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
