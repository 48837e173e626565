"""Watches the device plugin directory for the two signs of a kubelet restart.

A restarting kubelet deletes the sockets in its device plugin directory (ours included) and then
creates kubelet.sock again. The watcher does not decide anything: it reports what the
directory looks like (`DirectoryState`) and wakes its owner when that may have changed. Deciding
"this is a restart, register again" from two states is the server's job, which keeps the decision
identical under inotify and under polling.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from kubedevice.api.constants import KUBELET_SOCKET_NAME
from kubedevice.watch import DirectoryWatch, Mask

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
        self._watch = DirectoryWatch(
            plugin_dir,
            relevant=self._relevant,
            poll_state=self.state,
            poll_interval=poll_interval,
            use_inotify=use_inotify,
            name="kubelet-watcher",
        )
        self.changed = self._watch.changed

    @property
    def mode(self) -> str:
        """ "inotify" or "polling": what is actually in use after start()."""
        return self._watch.mode

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
        self._watch.start()

    async def stop(self) -> None:
        await self._watch.stop()

    def _relevant(self, name: str, _mask: Mask) -> bool:
        own = self._own_socket()
        return name == KUBELET_SOCKET_NAME or (own is not None and name == os.path.basename(own))


async def wait_for_directory(directory: str, poll_interval: float) -> None:
    """Return once `directory` exists (the kubelet creates its folders when it starts)."""

    def exists() -> bool:
        return os.path.isdir(directory)

    if exists():
        return
    # A missing directory can only be polled (inotify needs it to exist), until it exists.
    watch = DirectoryWatch(directory, poll_state=exists, poll_interval=poll_interval, use_inotify=False)
    watch.start()
    try:
        while not exists():
            await watch.changed.wait()
            watch.changed.clear()
    finally:
        await watch.stop()


def _identity(path: str) -> SocketIdentity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot stat %s: %s", path, exc)
        return None
    return SocketIdentity(st.st_dev, st.st_ino, st.st_ctime_ns)
