"""One way to watch a directory: wake the owner when its entries may have changed.

Three places need it: the plugin SDK (kubelet.sock created again, its own socket deleted), the node daemon's
manifest folder, and the device manager's `plugins_registry/`. inotify (through asyncinotify) wakes the
owner at once; where it cannot be used (not Linux, out of inotify instances, a filesystem without it, the
directory itself removed) the watch polls instead. A watch never decides anything: its owner looks at the
directory again when woken, so the owner's logic is the same under inotify and under polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable
from pathlib import Path

from asyncinotify import Inotify, Mask

__all__ = ["ENTRY_EVENTS", "DirectoryWatch", "Mask"]

log = logging.getLogger(__name__)

#: Entries created, removed, renamed in or out, or written and closed (a manifest saved in place).
ENTRY_EVENTS = Mask.CREATE | Mask.DELETE | Mask.MOVED_FROM | Mask.MOVED_TO | Mask.CLOSE_WRITE | Mask.ATTRIB
_GONE = Mask.DELETE_SELF | Mask.MOVE_SELF | Mask.IGNORED | Mask.UNMOUNT


class DirectoryWatch:
    """Sets `changed` when entries of `directory` may have changed.

    `relevant(name, mask)` filters inotify events by entry name and event kind (all pass by default).
    Under polling, `poll_state` (a cheap look at the directory) is compared every `poll_interval` and
    `changed` is set when it differs; without it every poll sets `changed`.
    `poll_state` runs on the event loop: keep it to a few `stat`s.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        relevant: Callable[[str, Mask], bool] | None = None,
        poll_state: Callable[[], Hashable] | None = None,
        poll_interval: float = 0.5,
        use_inotify: bool = True,
        name: str = "directory",
    ) -> None:
        self.directory = Path(directory)
        self._relevant = relevant
        self._poll_state = poll_state
        self._poll_interval = poll_interval
        self._use_inotify = use_inotify
        self._name = name
        self._inotify: Inotify | None = None
        self._task: asyncio.Task[None] | None = None
        self.changed = asyncio.Event()
        #: Entry names inotify reported since the last `take_names()`; None: anything may have changed.
        self._names: set[str] | None = set()
        #: "inotify" or "polling" once started, "stopped" before and after.
        self.mode = "stopped"

    def start(self) -> None:
        if self._use_inotify:
            try:
                inotify = Inotify()
                try:
                    inotify.add_watch(self.directory, ENTRY_EVENTS | Mask.ONLYDIR | _GONE)
                except BaseException:
                    inotify.close()
                    raise
            except OSError as err:
                log.info(
                    "inotify unavailable for %s (%s); polling every %.2fs",
                    self.directory,
                    err.strerror or err,
                    self._poll_interval,
                )
            else:
                self._inotify = inotify
                self.mode = "inotify"
                self._task = asyncio.create_task(self._read_events(inotify), name=f"{self._name} watch")
                return
        self._start_polling()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        self.mode = "stopped"

    async def wait_within(self, seconds: float) -> bool:
        """Wait until `changed` is set (True) or `seconds` pass (False); `changed` is cleared either way.

        The owner's periodic full look (a rescan) is the False case.
        """
        try:
            async with asyncio.timeout(seconds):
                await self.changed.wait()
        except TimeoutError:
            return False
        finally:
            self.changed.clear()
        return True

    def take_names(self) -> set[str] | None:
        """The names of the entries reported changed since the last call, or None when the owner must look
        at the whole directory (polling, a queue overflow, an event without a name)."""
        names, self._names = self._names, set()
        return names

    def _start_polling(self) -> None:
        self.mode = "polling"
        # The first look is taken now, not when the task first runs: a change in between must count.
        first = self._poll_state() if self._poll_state is not None else None
        self._task = asyncio.create_task(self._poll(first), name=f"{self._name} poll")

    async def _read_events(self, inotify: Inotify) -> None:
        async for event in inotify:
            if event.mask & _GONE:
                log.warning("%s was removed or moved; polling it from now on", self.directory)
                inotify.close()
                self._inotify = None
                self._names = None
                self.changed.set()
                self._start_polling()
                return
            # No name: a queue overflow or an event of the directory itself; look again to be safe.
            if event.name is None:
                self._names = None
                self.changed.set()
            elif self._relevant is None or self._relevant(str(event.name), event.mask):
                if self._names is not None:
                    self._names.add(str(event.name))
                self.changed.set()

    async def _poll(self, last: Hashable) -> None:
        while True:
            await asyncio.sleep(self._poll_interval)
            if self._poll_state is None:
                self._names = None
                self.changed.set()
                continue
            current = self._poll_state()
            if current != last:
                last = current
                self._names = None
                self.changed.set()
