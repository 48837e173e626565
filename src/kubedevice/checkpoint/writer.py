"""Serialised checkpoint writes with group commit.

Writes run in a thread (fsync must not block the loop). At most one runs at a time; callers that ask
while one is running share the next one, whose snapshot is taken when it starts, so the last state
always reaches the disk and a burst of N requests costs at most two writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubedevice.checkpoint.encoder import CheckpointEncoder
from kubedevice.checkpoint.errors import CheckpointError
from kubedevice.checkpoint.model import CheckpointData
from kubedevice.checkpoint.store import CheckpointStore

log = logging.getLogger(__name__)


class CheckpointWriteError(Exception):
    """Writing the checkpoint failed; str() names the file and the cause."""


class CheckpointWriter:
    def __init__(self, store: CheckpointStore, snapshot: Callable[[], CheckpointData]) -> None:
        self._store = store
        self._snapshot = snapshot
        self._requested = 0
        self._flush: tuple[int, asyncio.Task[None]] | None = None
        # Successive writes share most entries: encode only what changed since the previous one.
        self._encoder = CheckpointEncoder()
        self._requests: set[asyncio.Task[None]] = set()
        self.writes = 0

    async def write(self) -> None:
        """Return once a write that started after this call finished; raise if that write failed."""
        self._requested += 1
        target = self._requested
        while True:
            if self._flush is None:
                gen = self._requested
                self._flush = (gen, asyncio.create_task(self._write_once(gen)))
            gen, task = self._flush
            try:
                await asyncio.shield(task)
            except CheckpointWriteError:
                if gen >= target:
                    raise
            if gen >= target:
                return

    def request(self) -> None:
        """Ask for a write without waiting; failures are logged, and drain() waits for it."""
        task = asyncio.create_task(self.write())
        task.add_done_callback(_log_failure)
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def drain(self) -> None:
        """Wait for the writes asked for without waiting, and the write in progress, if any."""
        await asyncio.gather(*list(self._requests), return_exceptions=True)
        while self._flush is not None:
            _gen, task = self._flush
            await asyncio.gather(task, return_exceptions=True)

    async def _write_once(self, gen: int) -> None:
        try:
            data = self._snapshot()
            await asyncio.to_thread(self._store.write, data, self._encoder.encode_pieces)
            self.writes += 1
        except CheckpointError as err:
            raise CheckpointWriteError(str(err)) from err
        except Exception as err:
            raise CheckpointWriteError(
                f'failed to write checkpoint file "{self._store.path.name}": {err}'
            ) from err
        finally:
            if self._flush is not None and self._flush[0] == gen:
                self._flush = None


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s", task.exception())
