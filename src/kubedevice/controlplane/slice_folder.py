"""`D/resourceslices/`: the ResourceSlice files DRA plugins publish, read whenever the folder changes.

Whoever writes them (the SDK, another plugin, a test by hand), the daemon reads every file again on a
change, in a thread. Like the kubelet's wipe of a driver's slices: every file is deleted when the daemon
starts (before the plugin watcher starts; plugins publish again when they register), and a driver's files
(`<driver>.yaml` and any file whose documents all name that driver) are deleted once the DRA manager says
the driver's last plugin has been gone for the wipe delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

from kubedevice.controlplane.slice_pools import read_slices
from kubedevice.resource.document_file import is_whole_at_creation
from kubedevice.resource.slice_model import Pool, ResourceSliceDocument
from kubedevice.scheduler.pools import SliceReport, SliceScan
from kubedevice.tasks import cancel_and_wait
from kubedevice.watch import DirectoryWatch, Mask
from kubedevice.wording import failure_line

log = logging.getLogger("kubedevice.node.daemon")

SLICE_SUFFIXES = (".yaml", ".yml", ".json")

#: After a read that failed, the folder is read again on its next change or after this long (s).
_RETRY_AFTER = 5.0


def is_slice_name(name: str) -> bool:
    """A slice file: not hidden (a writer's temporary file), a known suffix."""
    return not name.startswith(".") and name.endswith(SLICE_SUFFIXES)


class SliceFolder:
    """The slices of `folder` for node `node_name` (with `node_labels`, matched by the slices' node
    selectors; by default only `kubernetes.io/hostname`); `on_change()` is called after a read that
    changed them."""

    def __init__(
        self,
        folder: Path,
        node_name: str,
        *,
        node_labels: Mapping[str, str] | None = None,
        on_change: Callable[[], None] | None = None,
        use_inotify: bool = True,
        poll_interval: float = 0.2,
    ) -> None:
        self.folder = folder
        self.node_name = node_name
        self.node_labels = dict(node_labels) if node_labels is not None else None
        self._on_change = on_change
        self._scan = SliceScan()
        self._watch = DirectoryWatch(
            folder,
            relevant=self._is_slice_event,
            poll_state=self._poll_state,
            poll_interval=poll_interval,
            use_inotify=use_inotify,
            name="resourceslices",
        )
        self._task: asyncio.Task[None] | None = None
        self._wipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Delete every file of the folder, then follow it."""
        removed = await asyncio.to_thread(self._wipe_all)
        if removed:
            log.info(
                "removed %d ResourceSlice file(s) left in %s: plugins publish again", removed, self.folder
            )
        self._watch.start()
        self._start_follower()

    async def stop(self) -> None:
        await cancel_and_wait(self._task, *self._wipes)
        self._task = None
        await self._watch.stop()

    @property
    def scan(self) -> SliceScan:
        """The folder as last read: this node's slices, their pools and what was ignored."""
        return self._scan

    def pools(self) -> tuple[Pool, ...]:
        return self._scan.pools

    def wipe_driver(self, driver: str) -> None:
        """The DRA manager's on_wipe: the driver's last plugin is gone for good; its slices go."""
        drivers: dict[str, set[str]] = {}
        for s in self._scan.slices:
            drivers.setdefault(s.meta.source, set()).add(s.driver)
        files = sorted({f"{driver}.yaml"} | {name for name, d in drivers.items() if d == {driver}})
        task = asyncio.create_task(asyncio.to_thread(self._remove, files), name=f"wipe {driver}")
        self._wipes.add(task)
        task.add_done_callback(self._wipes.discard)
        log.info("DRA driver %s is gone: its ResourceSlices are wiped (%s)", driver, ", ".join(files))

    def _start_follower(self) -> None:
        self._task = asyncio.create_task(self._follow(), name="resourceslices")
        self._task.add_done_callback(self._follower_ended)

    def _follower_ended(self, task: asyncio.Task[None]) -> None:
        """The follower never ends but by stop(); one that dies anyway is logged in one line and
        started again, or the folder would never be read again."""
        if task.cancelled() or task is not self._task:
            return
        err = task.exception()
        why = failure_line(err) if err is not None else "it returned"
        log.error("following %s stopped (%s): started again", self.folder, why)
        self._start_follower()

    async def _follow(self) -> None:
        failed: str | None = None
        while True:
            try:
                await self._read()
                failed = None
            except Exception as err:  # the folder must be read again, whatever happened
                # A file's failure is that file's error (read_slices): this is a bug, logged once.
                if failure_line(err) != failed:
                    failed = failure_line(err)
                    log.error("reading %s failed, read again later: %s", self.folder, failed)
            if failed is None:
                await self._watch.changed.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._watch.changed.wait(), _RETRY_AFTER)
            self._watch.changed.clear()

    async def _read(self) -> None:
        scan = await asyncio.to_thread(read_slices, self.folder, self.node_name, self.node_labels)
        if scan == self._scan:
            return
        old = {*self._scan.errors, *self._scan.warnings}
        for report in (*scan.errors, *scan.warnings):
            if report not in old:
                log.warning("ResourceSlice file %s: %s", report.file, report.message)
        self._scan = scan
        if self._on_change is not None:
            self._on_change()

    def _is_slice_event(self, name: str, mask: Mask) -> bool:
        if not is_slice_name(name):
            return False
        # A regular file is reported again when its writer closes it; writers that rename are whole.
        return not mask & Mask.CREATE or is_whole_at_creation(self.folder / name)

    def _poll_state(self) -> Hashable:
        try:
            with os.scandir(self.folder) as entries:
                return frozenset(
                    (e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in entries if is_slice_name(e.name)
                )
        except OSError:
            return None

    def _wipe_all(self) -> int:
        removed = 0
        with contextlib.suppress(FileNotFoundError), os.scandir(self.folder) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
        return removed

    def _remove(self, names: list[str]) -> None:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()

    # --- views ---

    def view(self) -> list[dict[str, Any]]:
        """Every slice read, in published order, each with its `error` (None when it is used as it is),
        then the slices and files ignored (with only their file, name and error)."""
        reports = {
            (r.file, r.slice): r.message for r in (*self._scan.errors, *self._scan.warnings) if r.slice
        }
        out = [_slice_json(s, reports.pop((s.meta.source, s.meta.name), None)) for s in self._scan.slices]
        out += [{"file": file, "name": name, "error": error} for (file, name), error in reports.items()]
        return out

    def file_errors(self) -> list[dict[str, str]]:
        """The reports about whole files and pools (no slice named)."""
        return [
            {"file": r.file, "error": r.message}
            for r in (*self._scan.errors, *self._scan.warnings)
            if not r.slice
        ]

    def devices_by_driver(self) -> dict[str, list[str]]:
        """driver -> `<pool>/<device>` of every device its complete pools publish and kubedevice can use."""
        out: dict[str, list[str]] = {}
        for pool in self._scan.pools:
            if pool.complete and pool.invalid is None:
                devices = [f"{pool.name}/{d.name}" for d in pool.devices if d.unsupported is None]
                out.setdefault(pool.driver, []).extend(devices)
        return out


def _slice_json(s: ResourceSliceDocument, error: str | None) -> dict[str, Any]:
    return {
        "file": s.meta.source,
        "name": s.meta.name,
        "driver": s.driver,
        "nodeName": s.node_name,
        "allNodes": s.all_nodes,
        "pool": {"name": s.pool, "generation": s.generation, "resourceSliceCount": s.slice_count},
        "devices": [
            {
                "name": d.name,
                "attributes": {k: {v.kind: v.value} for k, v in d.attributes.items()},
                "capacity": {k: str(c.value) for k, c in d.capacity.items()},
                **({"unsupported": d.unsupported} if d.unsupported else {}),
            }
            for d in s.devices
        ],
        "error": error,
    }


__all__ = ["SliceFolder", "SliceReport", "is_slice_name"]
