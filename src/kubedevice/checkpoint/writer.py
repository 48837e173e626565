"""The device manager's checkpoint writes, by group commit (:class:`kubedevice.durable.GroupCommit`).

The snapshot is taken on the event loop when a write begins and written on a thread; callers that ask
while a write runs share the next one, so the last state always reaches the disk and a burst of N
requests costs at most two writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubedevice.checkpoint.encoder import CheckpointEncoder
from kubedevice.checkpoint.errors import CheckpointError
from kubedevice.checkpoint.model import CheckpointData
from kubedevice.checkpoint.store import CheckpointStore
from kubedevice.durable import GroupCommit

log = logging.getLogger(__name__)


class CheckpointWriteError(Exception):
    """Writing the checkpoint failed; str() names the file and the cause."""


class CheckpointWriter:
    def __init__(self, store: CheckpointStore, snapshot: Callable[[], CheckpointData]) -> None:
        self._store = store
        # Successive writes share most entries: encode only what changed since the previous one.
        encoder = CheckpointEncoder()
        self._commit = GroupCommit.threaded(
            snapshot,
            lambda data: store.write(data, encoder.encode_pieces),
            name=f"write {store.path.name}",
            on_request_error=lambda err: log.error("%s", self._error(err)),
        )

    @property
    def writes(self) -> int:
        """Writes done (fewer than the requests: group commit)."""
        return self._commit.writes

    async def write(self) -> None:
        """Return once a write that started after this call finished; raise if that write failed."""
        try:
            await self._commit.commit()
        except Exception as err:
            raise self._error(err) from err

    def request(self) -> None:
        """Ask for a write without waiting; failures are logged, and drain() waits for it."""
        self._commit.request()

    async def drain(self) -> None:
        """Wait for the writes asked for without waiting, and the write in progress, if any."""
        await self._commit.drain()

    def _error(self, err: Exception) -> CheckpointWriteError:
        if isinstance(err, CheckpointError):
            return CheckpointWriteError(str(err))
        return CheckpointWriteError(f'failed to write checkpoint file "{self._store.path.name}": {err}')
