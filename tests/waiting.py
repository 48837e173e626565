"""Waiting in tests: poll a condition until it holds or a deadline passes, never a fixed sleep.

The deadlines are generous upper bounds for a loaded 2-core machine, not timing assertions: a test that
hits one has failed for another reason (the condition never became true).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

DEADLINE_S = 20.0
T = TypeVar("T")


def short_tempdir(prefix: str = "kd-") -> Path:
    """A folder short enough for unix socket paths (pytest's tmp_path can exceed their 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def poll(
    condition: Callable[[], T | None], what: str, deadline_s: float = DEADLINE_S, interval: float = 0.02
) -> T:
    """Call `condition` until it returns something truthy, and return that.

    Fails with an AssertionError naming `what` once `deadline_s` has passed.
    """
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s:g}s waiting for {what}")
        time.sleep(interval)


async def poll_async(
    condition: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S, interval: float = 0.01
) -> Any:
    """`poll` on the event loop; `condition` may also return an awaitable, which is awaited."""
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s:g}s waiting for {what}")
        await asyncio.sleep(interval)
