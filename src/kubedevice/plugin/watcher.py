"""Watches the device plugin directory for the two signs of a kubelet restart.

A restarting kubelet deletes the sockets in its device plugin directory (ours included) and then
creates kubelet.sock again (SPEC §8.1). The watcher does not decide anything: it reports what the
directory looks like (`DirectoryState`) and wakes its owner when that may have changed. Deciding
"this is a restart, register again" from two states is the server's job, which keeps the decision
identical under inotify and under polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from kubedevice.api.constants import KUBELET_SOCKET_NAME
from kubedevice.plugin.inotify import IN_DELETE_SELF, IN_MOVE_SELF, DirectoryWatch, InotifyUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SocketIdentity:
    """Which kubelet.sock file this is: a re-created socket differs in inode or change time."""

    device: int
    inode: int
    ctime_ns: int


@dataclass(frozen=True)
class DirectoryState:
    kubelet: SocketIdentity | None
    #: Which socket we serve on: the poller must see a deleted-then-replaced socket as a change.
    own_socket: str | None
    own_socket_present: bool


class KubeletWatcher:
    """Reports the directory state and sets `changed` when it may differ from the last look."""

    def __init__(
        self,
        plugin_dir: str,
        own_socket: Callable[[], str | None],
        *,
        use_inotify: bool = True,
        poll_interval: float = 0.5,
    ) -> None:
        self.plugin_dir = plugin_dir
        self._own_socket = own_socket
        self._use_inotify = use_inotify
        self._poll_interval = poll_interval
        self._inotify: DirectoryWatch | None = None
        self._poller: asyncio.Task[None] | None = None
        self.changed = asyncio.Event()
        #: "inotify" or "polling": what is actually in use after start().
        self.mode = "stopped"

    @property
    def kubelet_socket(self) -> str:
        return os.path.join(self.plugin_dir, KUBELET_SOCKET_NAME)

    def state(self) -> DirectoryState:
        own = self._own_socket()
        return DirectoryState(
            kubelet=_identity(self.kubelet_socket),
            own_socket=own,
            own_socket_present=own is not None and os.path.exists(own),
        )

    def start(self) -> None:
        if self._use_inotify:
            try:
                self._inotify = DirectoryWatch(self.plugin_dir)
            except InotifyUnavailable as exc:
                log.info(
                    "inotify unavailable (%s); polling %s every %.2fs",
                    exc,
                    self.plugin_dir,
                    self._poll_interval,
                )
            else:
                asyncio.get_running_loop().add_reader(self._inotify.fd, self._on_readable)
                self.mode = "inotify"
                return
        self._start_polling()

    async def stop(self) -> None:
        if self._inotify is not None:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().remove_reader(self._inotify.fd)
            self._inotify.close()
            self._inotify = None
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        self.mode = "stopped"

    def _start_polling(self) -> None:
        self.mode = "polling"
        self._poller = asyncio.get_running_loop().create_task(self._poll(), name="kubelet-watcher-poll")

    def _on_readable(self) -> None:
        assert self._inotify is not None
        own = self._own_socket()
        own_name = os.path.basename(own) if own else None
        relevant = False
        for event in self._inotify.read():
            if event.mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                log.warning("%s was removed or moved; falling back to polling", self.plugin_dir)
                asyncio.get_running_loop().remove_reader(self._inotify.fd)
                self._inotify.close()
                self._inotify = None
                self._start_polling()
                relevant = True
                break
            # An empty name is a queue overflow or a watch change: look again to be safe.
            if event.name in (KUBELET_SOCKET_NAME, own_name) or not event.name:
                relevant = True
        if relevant:
            self.changed.set()

    async def _poll(self) -> None:
        # stat() of two paths is far below a millisecond: not worth a thread hop.
        last = self.state()
        while True:
            await asyncio.sleep(self._poll_interval)
            current = self.state()
            if current != last:
                last = current
                self.changed.set()


def _identity(path: str) -> SocketIdentity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot stat %s: %s", path, exc)
        return None
    return SocketIdentity(st.st_dev, st.st_ino, st.st_ctime_ns)
