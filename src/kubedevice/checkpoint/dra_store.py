"""The DRA manager's checkpoint file on disk: read or create it, write it durably, move a bad one aside.

The write mechanics (temp file, fsync, rename, directory fsync, the fault hook) are
:class:`~kubedevice.checkpoint.store.CheckpointFile`'s, shared with the device manager's checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from kubedevice.api.constants import DRA_CHECKPOINT_NAME
from kubedevice.checkpoint.dra_codec import decode_dra, encode_dra
from kubedevice.checkpoint.dra_model import DRACheckpointData
from kubedevice.checkpoint.errors import CheckpointDirectoryError, CheckpointError, CheckpointNotFoundError
from kubedevice.checkpoint.store import CheckpointFile, read_file


class DRACheckpointStore(CheckpointFile):
    """``dra_manager_state`` in one directory (the root directory, as the kubelet keeps it).

    Blocking: callers on the event loop run these methods with ``asyncio.to_thread``. ``fault`` is the
    test hook of :class:`CheckpointFile`: each write calls it at each stage of ``WRITE_STAGES``.
    """

    def __init__(
        self,
        directory: Path,
        name: str = DRA_CHECKPOINT_NAME,
        *,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(directory, name, fault=fault)

    def read(self) -> DRACheckpointData:
        """Read and verify the file.

        Raises CheckpointNotFoundError, CheckpointFormatError (CheckpointUnreadableError when the path
        cannot be read at all) or CorruptDRACheckpointError (``checkpoint is corrupted``).
        """
        return decode_dra(read_file(self.path))

    def read_or_create(self) -> DRACheckpointData:
        """The kubelet's GetOrCreate: read the file, or create it empty (``ClaimInfoStateList: null``) when
        there is none and return that empty data.

        Raises CheckpointDirectoryError when the directory cannot be made, is not a directory or refuses the
        new file, and the errors of :meth:`read` for a file that is there but bad (left as it was).
        """
        directory = self._directory
        if directory.exists() and not directory.is_dir():
            raise CheckpointDirectoryError(directory, "not a directory")
        try:
            self._ensure_directory()
        except OSError as err:
            raise CheckpointDirectoryError(directory, err.strerror or str(err)) from None
        try:
            return self.read()
        except CheckpointNotFoundError:
            pass
        empty = DRACheckpointData()
        try:
            self._write(encode_dra(empty))
        except OSError as err:
            reason = f"cannot create {self._name} in it: {err.strerror or err}"
            raise CheckpointDirectoryError(directory, reason) from None
        except Exception as err:
            raise CheckpointError(f'failed to write checkpoint file "{self._name}": {err}') from err
        return empty

    def write(self, data: DRACheckpointData) -> None:
        """Replace the file with ``data``: temp file, fsync, rename, directory fsync.

        A crash at any point leaves either the old file or the new one, never a mix. On error the temp file
        is removed and CheckpointError is raised. The kubelet writes the whole cache each time; so do we.
        """
        self._replace(lambda: encode_dra(data))

    def write_pieces(self, pieces: list[bytes]) -> None:
        """The same for a file already encoded as pieces (:func:`encode_dra_pieces`), written in order."""
        self._replace(lambda: pieces)

    def move_aside(self, *, now: datetime | None = None) -> Path:
        """Rename the file to ``<name>.corrupt-<UTC YYYYMMDDTHHMMSSZ>`` in the same directory (``-N`` added
        when that name is taken), fsync the directory and return the new path.

        ``now`` (default: the current time) only names the file. Raises CheckpointNotFoundError when there is
        no file and CheckpointError when the rename fails.
        """
        stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        return self._move_aside(stamp, "move aside")
