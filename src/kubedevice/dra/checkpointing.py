"""Writing the claim-info cache to `dra_manager_state` by group commit (kubedevice.durable.GroupCommit).

Every change the kubelet wants to survive a crash is followed by a write of the whole cache. A caller
awaits a write that began after its change, so a write shared by several callers (group commit) is as good
as one each: concurrent prepares of unrelated pods cost one fsync, not one each.
"""

from __future__ import annotations

from collections.abc import Callable

from kubedevice.checkpoint import CheckpointError, DRACheckpointStore, encode_dra_pieces
from kubedevice.checkpoint.dra_codec import ClaimPiece
from kubedevice.dra.errors import DRACheckpointError
from kubedevice.durable import GroupCommit


class StateWriter:
    def __init__(self, store: DRACheckpointStore, pieces: Callable[[], list[ClaimPiece]]) -> None:
        # Each claim's encoded text is kept until the claim changes, so a write costs about the claims that
        # changed since the previous one, not the whole cache (a prepare writes twice). Encoded on the loop:
        # the cache must not change under the encoding; the pieces are immutable.
        self._commit = GroupCommit.threaded(
            lambda: encode_dra_pieces(pieces()), store.write_pieces, name=f"write {store.path.name}"
        )

    @property
    def writes(self) -> int:
        """Writes done, for the bench and tests; group commit makes the count smaller than the requests."""
        return self._commit.writes

    @property
    def write_seconds(self) -> float:
        """The seconds the writes took (encoding, fsync, rename)."""
        return self._commit.write_seconds

    async def write(self, context: str) -> None:
        """Return once a write that began after this call is on disk; raise DRACheckpointError
        `<context>: <why>` when it cannot be written."""
        try:
            await self._commit.commit()
        except CheckpointError as err:
            raise DRACheckpointError(f"{context}: {err}") from err
