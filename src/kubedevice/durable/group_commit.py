"""Group commit: a file kept in step with state that changes on the event loop, one write at a time.

A caller that changed the state awaits :meth:`GroupCommit.commit`, which returns once a write that BEGAN
after the call has finished (a write already running may have read the state before the change). Callers
that ask while a write runs share the next one, so a burst of N changes costs at most two writes rather
than N, and the last state always reaches the disk; the callers a write wakes run once before the next
begins, so one that changes the state again at once shares it too. A failed write raises its error in
every caller that waited for it; the next caller writes again.

The writes run in one task, not in the callers: a caller that is cancelled stops waiting, never the
write, so no second write can start while a cancelled one still runs in its thread. Why this algorithm:
a lock held by the callers (each writes for those before it) lets a cancelled caller release the lock
while its thread still writes, makes each waiter retry a failed write on its own, and costs a lock
hand-over per waiter; here each caller costs one future.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: One write: reads the state when it begins, writes it, and says whether anything was written.
Step = Callable[[], Awaitable[bool]]


class GroupCommit:
    """Serialised writes of one file, shared by the callers that ask while one runs.

    ``step`` is the write; :meth:`threaded` builds the usual one (the state read on the event loop, the
    file written on a thread). ``on_request_error`` gets the error of a write asked for by
    :meth:`request`, which nobody awaits (default: logged).
    """

    def __init__(
        self, step: Step, *, name: str, on_request_error: Callable[[Exception], None] | None = None
    ) -> None:
        self._step = step
        self._name = name
        self._on_request_error = on_request_error or self._log_error
        #: The callers waiting for the next write (each its own future: a cancelled caller stops only its
        #: own wait), and whether a write was asked for without waiting.
        self._waiters: list[asyncio.Future[None]] = []
        self._requested = False
        self._task: asyncio.Task[None] | None = None
        #: Writes done and the seconds they took (reading the state, the write, the fsyncs), for the bench
        #: and tests; group commit makes the count smaller than the commits.
        self.writes = 0
        self.write_seconds = 0.0

    @classmethod
    def threaded(
        cls,
        snapshot: Callable[[], T | None],
        write: Callable[[T], object],
        *,
        name: str,
        on_request_error: Callable[[Exception], None] | None = None,
    ) -> GroupCommit:
        """Writes that call ``snapshot`` on the event loop when they begin (so the state cannot change while
        it is read or encoded) and ``write`` on a thread with what it returned; None: nothing to write."""

        async def step() -> bool:
            value = snapshot()
            if value is None:
                return False
            await asyncio.to_thread(write, value)
            return True

        return cls(step, name=name, on_request_error=on_request_error)

    async def commit(self) -> None:
        """Return once a write that began after this call has finished; raise its error if it failed."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._start()
        await waiter

    def request(self) -> None:
        """Ask for a write without waiting for it; :meth:`drain` waits for it, a failure is reported."""
        self._requested = True
        self._start()

    async def drain(self) -> None:
        """Wait for the write that runs and those asked for, if any."""
        while (task := self._task) is not None:
            await asyncio.wait([task])  # a cancelled drain leaves the writes running

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self._name)

    async def _run(self) -> None:
        waiters: list[asyncio.Future[None]] = []
        try:
            while self._waiters or self._requested:
                # Callers from now on wait for the next write: this one may read the state too early for them.
                waiters, self._waiters = self._waiters, []
                requested, self._requested = self._requested, False
                started = time.perf_counter()
                try:
                    wrote = await self._step()
                except Exception as err:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(err)
                    if requested:
                        self._on_request_error(err)
                    continue
                if wrote:
                    self.writes += 1
                    self.write_seconds += time.perf_counter() - started
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)
                await self._let_woken_run(len(waiters))
        finally:
            self._task = None
            # Cancelled (the event loop is closing): nobody will write for those still waiting.
            for waiter in [*waiters, *self._waiters]:
                waiter.cancel()
            self._waiters, self._requested = [], False

    async def _let_woken_run(self, woken: int) -> None:
        """The callers just woken run before the next write begins: one that changes the state again at
        once (the next pod, say) shares that write instead of paying the one after."""
        if woken:
            await asyncio.sleep(0)

    def _log_error(self, err: Exception) -> None:
        log.error("%s: %s", self._name, err)
