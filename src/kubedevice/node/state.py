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
It is written durably (kubedevice.durable: temp file, fsync, rename, folder fsync) from a thread, one
write at a time, and saves asked for while a write runs share the next one (group commit).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubedevice.durable import GroupCommit, TempNames, remove_stale_temp_files, replace_file
from kubedevice.node.conditions import PodCondition

log = logging.getLogger(__name__)

STATE_VERSION = 1
#: `.<random>.tmp`, as tempfile.mkstemp(prefix=".", suffix=".tmp") named them before.
_TEMP_NAMES = TempNames(".", ".tmp")


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
    #: The conditions the daemon set (an eviction's DisruptionTarget); left out of the file when none.
    conditions: tuple[PodCondition, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {f: getattr(self, f) for f in _TEXT_FIELDS}
        if self.conditions:
            out["conditions"] = [c.to_json() for c in self.conditions]
        return out

    @classmethod
    def from_json(cls, entry: Any) -> SavedPod:
        """Raises KeyError or TypeError when `entry` is not what `to_json` wrote."""
        conditions = tuple(PodCondition.from_json(c) for c in entry.get("conditions") or ())
        return cls(**{k: str(entry[k]) for k in _TEXT_FIELDS}, conditions=conditions)


_TEXT_FIELDS = ("namespace", "name", "phase", "reason", "message", "digest")


class PodStateFile:
    """`{"version": 1, "bootID": str, "pods": {uid: SavedPod}}` at `path`; writes are serialized and atomic.

    `bootID` is the boot the pods last ran in: after a reboot no container is running any more, so the
    daemon must admit checkpointed pods again with the kubelet's checks instead of its restart fast path.
    """

    def __init__(self, path: Path, boot_id: str = "", *, fault: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.boot_id = boot_id
        #: The crash tests' hook, called at each write stage (node.config's POD_STATE_FAULT_ENV).
        self._fault = fault
        #: The boot ID the file on disk records; None when there is no file or it records none.
        self.saved_boot_id: str | None = None
        self._last_written: dict[str, SavedPod] | None = None
        self._snapshot: Callable[[], dict[str, SavedPod]] = dict
        self._commit = GroupCommit.threaded(self._changed, self._write, name=f"write {path.name}")

    def load(self) -> dict[str, SavedPod]:
        """The saved pods; a missing file is empty, an unreadable one is logged and treated as empty.

        Also removes the temporary files of writes a crash cut short (call it before the first save).
        """
        for name in remove_stale_temp_files(self.path.parent, _TEMP_NAMES):
            log.info("removed %s, left by a write a crash cut short", self.path.parent / name)
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
                pods[uid] = SavedPod.from_json(entry)
            except (KeyError, TypeError, AttributeError):
                log.error("ignoring malformed entry for pod %s in %s", uid, self.path)
        self._last_written = dict(pods)
        return pods

    async def save(self, snapshot: Callable[[], dict[str, SavedPod]]) -> None:
        """Return once a write that began after this call has finished (or found nothing to change).

        `snapshot` is called when that write begins, so saves asked for while one runs share the next
        (every caller passes the same view of the pods: the last one given is called).
        """
        self._snapshot = snapshot
        await self._commit.commit()

    def _changed(self) -> tuple[dict[str, SavedPod], str] | None:
        """The pods and boot to write when a write begins; None when the file holds them already."""
        pods = self._snapshot()
        if pods == self._last_written and self.saved_boot_id == self.boot_id:
            return None
        return pods, self.boot_id

    def _write(self, change: tuple[dict[str, SavedPod], str]) -> None:
        """On a thread, one at a time: what `_changed` reads next is set only once the file holds it."""
        pods, boot_id = change
        body = json.dumps(
            {
                "version": STATE_VERSION,
                "bootID": boot_id,
                "pods": {uid: p.to_json() for uid, p in sorted(pods.items())},
            },
            indent=1,
            sort_keys=True,
        )
        replace_file(self.path, body, temp=_TEMP_NAMES, fault=self._fault)
        self.saved_boot_id = boot_id
        self._last_written = pods
