"""Background tasks: stopping them one way everywhere, and waking the waiters of a change."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel the tasks and return once each has ended; None entries are skipped.

    A task that swallows one cancellation (3.11's wait_for could, when the awaited future finished at the
    same moment) is cancelled again, so a stop never hangs. Unlike awaiting a task inside
    `suppress(CancelledError)`, a cancellation of the caller itself still goes on. A task that had failed
    is logged, not raised: the stop goes on with the rest.
    """
    pending = {t for t in tasks if t is not None}
    while not all(t.done() for t in pending):
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=0.5)
    for task in pending:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s ended with %r", task.get_name(), task.exception())


class Signal:
    """Wakes every waiter at once, each time it fires; a waiter that took `current()` before a fire wakes
    even if it starts waiting after it."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def current(self) -> asyncio.Event:
        return self._event

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()


async def wait_any(events: Iterable[asyncio.Event], seconds: float) -> None:
    """Return once one of `events` is set, or after `seconds`."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
