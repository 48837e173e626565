"""A feed of manager changes: callbacks for the daemon, and a version number to wait on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubedevice.manager.types import Change

log = logging.getLogger(__name__)

ChangeListener = Callable[[Change], None]


class ChangeFeed:
    def __init__(self) -> None:
        self._listeners: list[ChangeListener] = []
        self._version = 0
        self._event = asyncio.Event()

    @property
    def version(self) -> int:
        """Grows by one with every change."""
        return self._version

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener` on the loop after each change; returns the function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def publish(self, change: Change) -> None:
        self._version += 1
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                # A faulty observer must not break the manager's own bookkeeping.
                log.exception("change listener %r failed", listener)
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, after_version: int) -> int:
        """Wait until the version is above `after_version`; returns the new version."""
        while self._version <= after_version:
            await self._event.wait()
        return self._version
