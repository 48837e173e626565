"""A minimal non-blocking inotify reader over ctypes (Linux only; no extra dependency).

Only what the watcher needs: watch one directory for entries created, moved in, deleted or moved
out, and read the names. The fd is non-blocking and meant for `loop.add_reader`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys
from dataclasses import dataclass

IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len


@dataclass(frozen=True)
class InotifyEvent:
    mask: int
    name: str


class InotifyUnavailable(OSError):
    """inotify cannot be used here (not Linux, no libc symbol, or the kernel refused)."""


class DirectoryWatch:
    """An inotify instance watching one directory's entries."""

    MASK = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR

    def __init__(self, directory: str) -> None:
        if not sys.platform.startswith("linux"):
            raise InotifyUnavailable(f"inotify is Linux-only (platform {sys.platform})")
        libc_name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(libc_name, use_errno=True)
            init1 = libc.inotify_init1
            add_watch = libc.inotify_add_watch
        except (OSError, AttributeError) as exc:
            raise InotifyUnavailable(f"inotify functions not found in libc: {exc}") from exc
        init1.argtypes, init1.restype = [ctypes.c_int], ctypes.c_int
        add_watch.argtypes, add_watch.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
        fd = init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise InotifyUnavailable(err, f"inotify_init1 failed: {os.strerror(err)}")
        if add_watch(fd, os.fsencode(directory), self.MASK) < 0:
            err = ctypes.get_errno()
            os.close(fd)
            raise InotifyUnavailable(err, f"inotify_add_watch({directory}) failed: {os.strerror(err)}")
        self.fd = fd

    def read(self) -> list[InotifyEvent]:
        """Drain what is ready without blocking; [] when nothing is."""
        events: list[InotifyEvent] = []
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return events
            offset = 0
            while offset + _HEADER.size <= len(data):
                _wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
                events.append(InotifyEvent(mask, os.fsdecode(raw.rstrip(b"\0"))))
                offset += _HEADER.size + length

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
