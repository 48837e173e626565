"""The daemon's small memory of pod phases, so a restart neither admits Failed or Succeeded pods again
nor fails a pod that was Running.

Devices are remembered by the device manager's checkpoint, and a pod with a checkpoint entry is known to
have been Running from that alone; so is a pod with claims whose entries in the DRA checkpoint list it
with their devices. This file keeps the rest of what the kubelet would learn back from the API server
and the container runtime: each Failed or Succeeded pod's phase, reason and message, each Running pod no
checkpoint shows running (no device: a zero request, or admitted before its plugin registered; a claim
whose driver prepared no device), the manifest content each had, and the boot they ran in. So it changes
when a pod terminates or is tried again, or when such a pod starts Running, never for an admission that
wrote a checkpoint.
It is written atomically (temp file, fsync, rename) from a thread, one write at a time, and saves asked
for while a write runs share the next one (group commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubedevice.atomic_file import write_atomic

log = logging.getLogger(__name__)

STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class SavedPod:
    namespace: str
    name: str
    phase: str
    reason: str
    message: str
    #: The hash of the pod's decoded manifest document when the phase was reached (node.identity); another
    #: hash is another pod version, while a comment or another document of the same file changes nothing.
    digest: str


class PodStateFile:
    """`{"version": 1, "bootID": str, "pods": {uid: SavedPod}}` at `path`; writes are serialized and atomic.

    `bootID` is the boot the pods last ran in: after a reboot no container is running any more, so the
    daemon must admit checkpointed pods again with the kubelet's checks instead of its restart fast path.
    """

    def __init__(self, path: Path, boot_id: str = "") -> None:
        self.path = path
        self.boot_id = boot_id
        #: The boot ID the file on disk records; None when there is no file or it records none.
        self.saved_boot_id: str | None = None
        self._lock = asyncio.Lock()
        self._last_written: dict[str, SavedPod] | None = None
        #: Saves asked for, and the number of the last one a finished write covered (group commit).
        self._requested = 0
        self._covered = 0

    def load(self) -> dict[str, SavedPod]:
        """The saved pods; a missing file is empty, an unreadable one is logged and treated as empty.

        Also removes the temporary files of writes a crash cut short (call it before the first save).
        """
        _remove_stale_temp_files(self.path.parent)
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            log.error("ignoring unreadable pod state file %s: %s", self.path, err)
            return {}
        pods: dict[str, SavedPod] = {}
        entries: Any = raw.get("pods") if isinstance(raw, dict) else None
        if not isinstance(entries, dict) or raw.get("version") != STATE_VERSION:
            log.error("ignoring pod state file %s: not a version %d state file", self.path, STATE_VERSION)
            return {}
        saved_boot = raw.get("bootID")
        self.saved_boot_id = saved_boot if isinstance(saved_boot, str) and saved_boot else None
        for uid, entry in entries.items():
            try:
                pods[uid] = SavedPod(**{k: str(entry[k]) for k in SavedPod.__dataclass_fields__})
            except (KeyError, TypeError):
                log.error("ignoring malformed entry for pod %s in %s", uid, self.path)
        self._last_written = dict(pods)
        return pods

    async def save(self, snapshot: Callable[[], dict[str, SavedPod]]) -> None:
        """Return once a write that began after this call has finished (or found nothing to change).

        `snapshot` is called when that write begins, so saves asked for while one runs share the next.
        """
        self._requested += 1
        mine = self._requested
        async with self._lock:
            if self._covered >= mine:
                return
            covers = self._requested
            pods = snapshot()
            if pods != self._last_written or self.saved_boot_id != self.boot_id:
                await asyncio.to_thread(_write_atomic, self.path, pods, self.boot_id)
                self.saved_boot_id = self.boot_id
                self._last_written = pods
            self._covered = covers


#: What tempfile.mkstemp(prefix=".", suffix=".tmp") names the files _write_atomic creates.
_TEMP_NAME = re.compile(r"\.[a-z0-9_]{8}\.tmp")


def _remove_stale_temp_files(directory: Path) -> None:
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return
    for entry in entries:
        if _TEMP_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                log.info("removed %s, left by a write a crash cut short", entry.path)


def _write_atomic(path: Path, pods: dict[str, SavedPod], boot_id: str) -> None:
    body = json.dumps(
        {
            "version": STATE_VERSION,
            "bootID": boot_id,
            "pods": {uid: asdict(p) for uid, p in sorted(pods.items())},
        },
        indent=1,
        sort_keys=True,
    )
    write_atomic(path, body, prefix=".")
