"""`D/device_taints.json`: when the daemon first saw each `NoExecute` taint that has no `timeAdded`.

The API server stamps a taint's `timeAdded` when a slice or a DeviceTaintRule is written without one (and
a rule's again when its effect changes); the eviction controller counts `tolerationSeconds` from it. The
manifest folder and the slice files have no API server, so the daemon records the first sighting instead,
durably, before an eviction counts from it: a restart in the middle of a countdown goes on with the same
deadline, neither starting it again nor forgetting it.

    {"version": 1, "firstSeen": [{"rule": <uid>, "effect": "NoExecute", "time": "<RFC 3339>"},
                                 {"driver": ..., "pool": ..., "device": ..., "taint": "k=v:NoExecute",
                                  "time": ...}]}

An entry goes when its taint does: a rule's when no rule with that UID and effect is there, a device's
when its pool is published without it (slice files are wiped at start and published again by their
drivers: while a pool is missing its entries stay). Written like the claim store (temporary file, fsync,
rename, folder fsync; group commit), only when the content changed; an unreadable file is logged and
taken as empty (the countdowns then start again: later, never sooner).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubedevice.controlplane.taint_eviction import TrackedTaint
from kubedevice.durable import GroupCommit, TempNames, remove_stale_temp_files, replace_file
from kubedevice.resource.times import metav1_time, parse_time

__all__ = ["TAINT_TIMES_NAME", "TaintTimes"]

log = logging.getLogger("kubedevice.node.daemon")

TAINT_TIMES_NAME = "device_taints.json"
_VERSION = 1
_DEVICE_FIELDS = ("driver", "pool", "device", "taint")

Key = tuple[str, ...]


class TaintTimes:
    """The first sightings, kept in memory and written to `path` after each change."""

    def __init__(self, path: Path, *, fault: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._fault = fault
        self._seen: dict[Key, datetime] = {}
        self._temp = TempNames.beside(path)
        self._written: bytes | None = None
        self._commit = GroupCommit.threaded(
            self._snapshot,
            self._write,
            name=f"save {path.name}",
            on_request_error=lambda err: log.error("cannot write %s: %s", path, err),
        )

    def load(self) -> None:
        """Read the file (blocking: on a thread), removing what writes a crash cut short left."""
        for name in remove_stale_temp_files(self.path.parent, self._temp):
            log.info("removed %s, left by a write a crash cut short", self.path.parent / name)
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as err:
            log.error("ignoring unreadable %s (countdowns start again): %s", self.path, err)
            return
        try:
            self._seen = _decode(json.loads(blob))
        except (ValueError, TypeError, KeyError) as err:
            log.error(
                "ignoring %s (countdowns start again): not a version %d file: %s", self.path, _VERSION, err
            )
            return
        self._written = blob

    def added(self, taint: TrackedTaint) -> datetime:
        """When the taint was added: its `timeAdded`, else its first sighting (now, if it was never seen:
        `observe` records it)."""
        if taint.taint.time_added is not None:
            stamp = parse_time(taint.taint.time_added)
            if stamp is not None:
                return stamp
        return self._seen.get(taint.key) or datetime.now(UTC)

    def observe(self, taints: Iterable[TrackedTaint], pools: set[tuple[str, str]], now: datetime) -> bool:
        """Record the first sighting of each taint without `timeAdded` and forget the taints that are gone;
        True when that changed what the file must hold (then `commit`)."""
        current: set[Key] = set()
        changed = False
        for taint in taints:
            if taint.taint.time_added is not None:
                continue
            current.add(taint.key)
            if taint.key not in self._seen:
                self._seen[taint.key] = now.replace(microsecond=0)
                changed = True
        for key in list(self._seen):
            gone = key not in current and (key[0] == "rule" or (key[1], key[2]) in pools)
            if gone:
                del self._seen[key]
                changed = True
        if changed:
            self._commit.request()
        return changed

    async def commit(self) -> None:
        """Return once what is recorded now is on disk; raises the write's error."""
        await self._commit.commit()

    async def stop(self) -> None:
        await self._commit.drain()

    def _snapshot(self) -> bytes | None:
        blob = (json.dumps(_encode(self._seen), sort_keys=True) + "\n").encode()
        return None if blob == self._written else blob

    def _write(self, blob: bytes) -> None:
        replace_file(self.path, blob, temp=self._temp, fault=self._fault)
        self._written = blob


async def load_taint_times(root: Path, fault: Callable[[str], None] | None = None) -> TaintTimes:
    times = TaintTimes(root / TAINT_TIMES_NAME, fault=fault)
    await asyncio.to_thread(times.load)
    return times


def _encode(seen: Mapping[Key, datetime]) -> dict[str, Any]:
    entries: list[dict[str, str]] = []
    for key, when in sorted(seen.items()):
        if key[0] == "rule":
            entries.append({"rule": key[1], "effect": key[2], "time": metav1_time(when)})
        else:
            entries.append({**dict(zip(_DEVICE_FIELDS, key[1:], strict=True)), "time": metav1_time(when)})
    return {"version": _VERSION, "firstSeen": entries}


def _decode(value: Any) -> dict[Key, datetime]:
    if not isinstance(value, dict) or value.get("version") != _VERSION:
        raise ValueError("no version")
    seen: dict[Key, datetime] = {}
    for entry in value["firstSeen"]:
        when = parse_time(str(entry["time"]))
        if when is None:
            raise ValueError(f"bad time {entry['time']!r}")
        if "rule" in entry:
            seen[("rule", str(entry["rule"]), str(entry["effect"]))] = when
        else:
            seen[("device", *(str(entry[f]) for f in _DEVICE_FIELDS))] = when
    return seen
