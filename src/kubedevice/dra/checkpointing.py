"""Writing the claim-info cache to `dra_manager_state`: one write at a time, from a thread, group commit.

Every change the kubelet wants to survive a crash is followed by a write of the whole cache. A caller
awaits a write that began after its change, so a write shared by several callers (group commit) is as good
as one each: concurrent prepares of unrelated pods cost one fsync, not one each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kubedevice.checkpoint import CheckpointError, DRACheckpointStore
from kubedevice.checkpoint.dra_model import DRACheckpointData
from kubedevice.dra.errors import DRACheckpointError


class StateWriter:
    def __init__(self, store: DRACheckpointStore, snapshot: Callable[[], DRACheckpointData]) -> None:
        self._store = store
        self._snapshot = snapshot
        self._lock = asyncio.Lock()
        self._requested = 0
        self._written = 0
        #: Writes done and the seconds they took (encoding, fsync, rename), for the bench and tests; group
        #: commit makes the count smaller than the requests.
        self.writes = 0
        self.write_seconds = 0.0

    async def write(self, context: str) -> None:
        """Return once a write that began after this call is on disk; raise DRACheckpointError
        `<context>: <why>` when it cannot be written."""
        self._requested += 1
        mine = self._requested
        async with self._lock:
            if self._written >= mine:
                return
            covered = self._requested
            data = self._snapshot()
            start = time.perf_counter()
            try:
                await asyncio.to_thread(self._store.write, data)
            except CheckpointError as err:
                raise DRACheckpointError(f"{context}: {err}") from err
            self._written = covered
            self.writes += 1
            self.write_seconds += time.perf_counter() - start
