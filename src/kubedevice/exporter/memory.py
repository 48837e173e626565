"""Keeping the exporter's resident memory near what it holds, not what it once decoded (glibc only).

A refresh decodes a checkpoint of MiBs and each scrape builds tens of thousands of samples on its own
server thread; glibc keeps freed memory in per-thread arenas and at the top of the heap, so the RSS would
settle at the sum of those peaks. Two arenas and a trim after each refresh give it back. On a libc
without these calls (musl, macOS) both are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: mallopt's M_ARENA_MAX (glibc malloc.h).
_M_ARENA_MAX = -8
_ARENAS = 2


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


class MemoryReleaser:
    def __init__(self) -> None:
        self._libc = _libc()

    def limit_arenas(self) -> None:
        """Call before threads start: later threads share the arenas instead of getting their own."""
        if self._libc is not None:
            self._libc.mallopt(_M_ARENA_MAX, _ARENAS)

    def release(self) -> None:
        """Give free heap pages back to the system (about a millisecond; nothing here makes cycles)."""
        if self._libc is not None:
            self._libc.malloc_trim(0)
