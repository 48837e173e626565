"""The checkpoint file on disk: a read that never crashes and a durable, atomic write.

The write is :func:`kubedevice.durable.replace_file`'s (temp file, fsync, rename, directory fsync); a file
that cannot be used is set aside, not lost. :class:`CheckpointFile` holds these mechanics for the
checkpoints: the device manager's (:class:`CheckpointStore`, here), the DRA manager's (:mod:`.dra_store`)
and the daemon's `dra_claims.json`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from kubedevice.api.constants import CHECKPOINT_NAME
from kubedevice.checkpoint.decode import decode
from kubedevice.checkpoint.errors import (
    CheckpointError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CheckpointUnreadableError,
)
from kubedevice.checkpoint.json_writer import encode
from kubedevice.checkpoint.model import CheckpointData, DecodedCheckpoint
from kubedevice.durable import WRITE_STAGES, TempNames, fsync_folder, remove_stale_temp_files, replace_file

#: A file larger than this is refused rather than read into memory. A real checkpoint with 10,000
#: allocations is a few MiB; this bound only keeps a stray huge file from exhausting memory.
MAX_CHECKPOINT_BYTES: Final = 256 * 1024 * 1024

#: The checkpoint directories' mode when a write creates them (the kubelet's device plugin directory's).
_DIRECTORY_MODE: Final = 0o750


def read_file(path: Path) -> bytes:
    """Read a checkpoint file's bytes; every failure is a CheckpointError with the path in its message."""
    try:
        # O_NONBLOCK keeps a FIFO at the path from blocking the open; regular files ignore it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CheckpointNotFoundError(path) from None
    except OSError as err:
        raise CheckpointUnreadableError(f"cannot read {path}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = " (a directory)" if stat.S_ISDIR(info.st_mode) else ""
            raise CheckpointUnreadableError(f"cannot read {path}: not a regular file{kind}")
        if info.st_size > MAX_CHECKPOINT_BYTES:
            raise CheckpointFormatError(
                f"{path} is {info.st_size} bytes, over the {MAX_CHECKPOINT_BYTES}-byte checkpoint limit"
            )
        chunks = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > MAX_CHECKPOINT_BYTES:
                raise CheckpointFormatError(
                    f"{path} grew past the {MAX_CHECKPOINT_BYTES}-byte checkpoint limit while being read"
                )
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as err:
        raise CheckpointUnreadableError(f"cannot read {path}: {err.strerror or err}") from None
    finally:
        os.close(fd)


_VALID_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,250}")
#: Like Go's os.CreateTemp(dir, "."), as the kubelet names them: a dot name (hidden from checkpoint
#: listings) with random digits.
_TEMP_NAMES: Final = TempNames(".", "")


class CheckpointFile:
    """One named file in one directory, replaced durably and atomically: what every checkpoint shares.

    Blocking: callers on the event loop run these methods with ``asyncio.to_thread``.

    ``fault`` is a test hook, not configuration: when given, each write calls it with each stage name of
    :data:`WRITE_STAGES` ("after-temp-write", "after-fsync", "after-rename") so a crash-consistency harness
    can kill the process at that point. An exception raised by the hook is handled like any write error.
    """

    def __init__(self, directory: Path, name: str, *, fault: Callable[[str], None] | None = None) -> None:
        if not _VALID_NAME.fullmatch(name) or name.startswith("."):
            raise ValueError(
                f"invalid checkpoint name {name!r}: "
                "want 1-250 letters, digits, '_', '-' or '.', not starting with '.'"
            )
        self._directory = Path(directory)
        self._name = name
        self._fault = fault

    @property
    def path(self) -> Path:
        return self._directory / self._name

    def _replace(self, encode_blob: Callable[[], bytes | list[bytes]]) -> None:
        """Replace the file with what ``encode_blob`` gives: temp file, fsync, rename, directory fsync.

        A crash at any point leaves either the old file or the new one, never a mix. On error the temp file
        is removed and CheckpointError is raised (an encoding error too).
        """
        try:
            self._write(encode_blob())
        except CheckpointError:
            raise
        except Exception as err:
            raise CheckpointError(f'failed to write checkpoint file "{self._name}": {err}') from err

    def _ensure_directory(self) -> None:
        directory = self._directory
        if not directory.is_dir():
            directory.mkdir(mode=_DIRECTORY_MODE, parents=True, exist_ok=True)
            # mkdir's mode is filtered by the umask; the device plugin directory must be exactly 0750.
            os.chmod(directory, _DIRECTORY_MODE)

    def _write(self, blob: bytes | list[bytes]) -> None:
        replace_file(self.path, blob, temp=_TEMP_NAMES, folder_mode=_DIRECTORY_MODE, fault=self._stage)

    def remove_stale_temp_files(self) -> list[str]:
        """Delete the temporary files of writes a crash cut short; returns their names.

        The kubelet never removes them; after enough crashes they would fill the directory. Call this only
        while no write can run (at start, before the first write).
        """
        return remove_stale_temp_files(self._directory, _TEMP_NAMES)

    def _stage(self, stage: str) -> None:
        # The hook sees the crash stages only: a kill after the folder's fsync is one after the rename.
        if self._fault is not None and stage in WRITE_STAGES:
            self._fault(stage)

    def _move_aside(self, stamp: str, verb: str) -> Path:
        """Rename the file to ``<name>.corrupt-<stamp>`` (``-N`` added while taken), fsync the directory."""
        target = self._directory / f"{self._name}.corrupt-{stamp}"
        suffix = 0
        while target.exists() or target.is_symlink():
            suffix += 1
            target = self._directory / f"{self._name}.corrupt-{stamp}-{suffix}"
        try:
            os.rename(self.path, target)
        except FileNotFoundError:
            raise CheckpointNotFoundError(self.path) from None
        except OSError as err:
            raise CheckpointError(f"cannot {verb} {self.path}: {err.strerror or err}") from None
        fsync_folder(self._directory)
        return target


class CheckpointStore(CheckpointFile):
    """The device manager's checkpoint file in one directory: read it, write it durably and atomically,
    set it aside. See :class:`CheckpointFile` for the ``fault`` hook.
    """

    def __init__(
        self,
        directory: Path,
        name: str = CHECKPOINT_NAME,
        *,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(directory, name, fault=fault)

    def read(self) -> DecodedCheckpoint:
        """Read and verify the file.

        Raises CheckpointNotFoundError, CheckpointFormatError (CheckpointUnreadableError when the path
        cannot be read at all) or CorruptCheckpointError.
        """
        return decode(read_file(self.path))

    def write(
        self, data: CheckpointData, encoder: Callable[[CheckpointData], bytes | list[bytes]] = encode
    ) -> None:
        """Replace the file with ``data``: temp file, fsync, rename, directory fsync.

        A crash at any point leaves either the old file or the new one, never a mix. On error the temp file
        is removed and CheckpointError is raised. ``data`` is a snapshot: its lists must not change while
        the write runs in its thread. ``encoder`` must give :func:`encode`'s bytes, whole or as pieces
        written in order; a writer of successive checkpoints passes one that remembers the previous write
        (``CheckpointEncoder.encode_pieces``).
        """
        self._replace(lambda: encoder(data))

    def quarantine(self) -> Path:
        """Move the current file aside as ``<name>.corrupt-<UTC timestamp>`` and return its new path.

        The kubelet leaves a bad file to be overwritten; keeping a copy lets a person see what went wrong.
        """
        return self._move_aside(datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ"), "quarantine")
