"""Writing the claim-info cache to `dra_manager_state`: one write at a time, from a thread, group commit.

Every change the kubelet wants to survive a crash is followed by a write of the whole cache. A caller
awaits a write that began after its change, so a write shared by several callers (group commit) is as good
as one each: concurrent prepares of unrelated pods cost one fsync, not one each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kubedevice.checkpoint import CheckpointError, DRACheckpointStore, encode_dra_pieces
from kubedevice.checkpoint.dra_codec import ClaimPiece
from kubedevice.dra.errors import DRACheckpointError


class StateWriter:
    def __init__(self, store: DRACheckpointStore, pieces: Callable[[], list[ClaimPiece]]) -> None:
        self._store = store
        # Each claim's encoded text is kept until the claim changes, so a write costs about the claims that
        # changed since the previous one, not the whole cache (a prepare writes twice).
        self._pieces = pieces
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
            start = time.perf_counter()
            # Encoded on the loop: the cache must not change under the encoding; the pieces are immutable.
            file = encode_dra_pieces(self._pieces())
            try:
                await asyncio.to_thread(self._store.write_pieces, file)
            except CheckpointError as err:
                raise DRACheckpointError(f"{context}: {err}") from err
            self._written = covered
            self.writes += 1
            self.write_seconds += time.perf_counter() - start
