"""Keeping `dra_claims.json` in step with the claim state: each decision applied in memory, then written.

Writes are kubedevice.durable's group commit: on a thread, one at a time and in order; changes made while
a write runs share the next one (the state is encoded when the write begins), so a burst of decisions
costs fewer writes than changes. A failed write is logged: the next change writes the whole state again.
"""

from __future__ import annotations

import logging

from kubedevice.controlplane.claim_store import ClaimStore, ClaimStoreFile, Updates
from kubedevice.durable import GroupCommit

log = logging.getLogger("kubedevice.node.daemon")


class ClaimStoreSaver:
    """Applies updates to `state` and writes it to `file` after each change."""

    def __init__(self, state: ClaimStore, file: ClaimStoreFile) -> None:
        self.state = state
        self._file = file
        self.path = file.path
        self._commit = GroupCommit.threaded(
            lambda: self.state.encode(),  # the state as it is when the write begins, encoded on the loop
            file.write,
            name="save dra_claims.json",
            on_request_error=lambda err: log.error("cannot write %s: %s", file.path, err),
        )

    def apply(self, updates: Updates) -> bool:
        """Apply a decision to the state and save it when it changed; True when it did."""
        if not self.state.apply(updates):
            return False
        self._commit.request()
        return True

    async def commit(self) -> None:
        """Return once the state as it is now is on disk (a write that began after this call ended);
        raises the write's error."""
        await self._commit.commit()

    async def stop(self) -> None:
        """Wait for the saves asked for so far."""
        await self._commit.drain()
