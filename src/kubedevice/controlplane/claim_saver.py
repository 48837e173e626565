"""Keeping `dra_claims.json` in step with the claim state: each decision applied in memory, then written.

Writes run on a thread, one at a time and in order; changes made while a write waits for its turn share
it (the state is encoded when the write starts), so a burst of decisions costs fewer writes than changes.
A failed write is logged: the next change writes the whole state again.
"""

from __future__ import annotations

import asyncio
import logging

from kubedevice.checkpoint import CheckpointError
from kubedevice.controlplane.claim_store import ClaimStore, ClaimStoreFile, Updates

log = logging.getLogger("kubedevice.node.daemon")


class ClaimStoreSaver:
    """Applies updates to `state` and writes it to `file` after each change."""

    def __init__(self, state: ClaimStore, file: ClaimStoreFile) -> None:
        self.state = state
        self._file = file
        self._lock = asyncio.Lock()
        self._saves: set[asyncio.Task[None]] = set()
        self._queued = False

    def apply(self, updates: Updates) -> bool:
        """Apply a decision to the state and save it when it changed; True when it did."""
        if not self.state.apply(updates):
            return False
        if not self._queued:  # a save still waiting for its turn will write this change too
            self._queued = True
            task = asyncio.create_task(self._save(), name="save dra_claims.json")
            self._saves.add(task)
            task.add_done_callback(self._saves.discard)
        return True

    async def _save(self) -> None:
        async with self._lock:
            self._queued = False  # a change from now on needs a save of its own
            blob = self.state.encode()  # the state as it is now, encoded on the loop
            try:
                await asyncio.to_thread(self._file.write, blob)
            except (OSError, CheckpointError) as err:
                log.error("cannot write %s: %s", self._file.path, err)

    async def stop(self) -> None:
        """Wait for the saves asked for so far."""
        await asyncio.gather(*self._saves, return_exceptions=True)
