"""The checkpoint file on disk: a read that never crashes and a durable, atomic write.

The write is temp file, fsync, rename, directory fsync; a file that cannot be used is set aside, not lost.
:class:`CheckpointFile` holds these mechanics for both checkpoints: the device manager's
(:class:`CheckpointStore`, here) and the DRA manager's (:mod:`.dra_store`).
"""

from __future__ import annotations

import contextlib
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

#: A file larger than this is refused rather than read into memory. A real checkpoint with 10,000
#: allocations is a few MiB; this bound only keeps a stray huge file from exhausting memory.
MAX_CHECKPOINT_BYTES: Final = 256 * 1024 * 1024

#: Stages at which a checkpoint store calls its fault hook during a write, in order.
WRITE_STAGES: Final = ("after-temp-write", "after-fsync", "after-rename")


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
#: What _create_temp names its files.
_TEMP_NAME: Final = re.compile(r"\.\d+")


#: How many buffers one writev may take (IOV_MAX; POSIX guarantees at least 16, Linux has 1024).
_IOV_MAX: Final = max(16, os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16)


def _write_all(fd: int, pieces: list[bytes]) -> None:
    """Write the pieces in order with writev: a multi-MiB file is never joined into one copy first."""
    for start in range(0, len(pieces), _IOV_MAX):
        batch = pieces[start : start + _IOV_MAX]
        written = os.writev(fd, batch)
        wanted = sum(map(len, batch))
        if written < wanted:
            # A short write (a full disk, a signal): finish this batch from where it stopped.
            rest = memoryview(b"".join(batch))[written:]
            while rest:
                rest = rest[os.write(fd, rest) :]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
            directory.mkdir(mode=0o750, parents=True, exist_ok=True)
            # mkdir's mode is filtered by the umask; the device plugin directory must be exactly 0750.
            os.chmod(directory, 0o750)

    def _write(self, blob: bytes | list[bytes]) -> None:
        self._ensure_directory()
        temp, fd = self._create_temp()
        try:
            try:
                _write_all(fd, [blob] if isinstance(blob, bytes) else blob)
                self._stage("after-temp-write")
                os.fsync(fd)
                self._stage("after-fsync")
            finally:
                os.close(fd)
            os.replace(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self._stage("after-rename")
        _fsync_directory(self._directory)

    def _create_temp(self) -> tuple[Path, int]:
        # Like Go's os.CreateTemp(dir, "."): a dot name (hidden from checkpoint listings) with random digits.
        for _ in range(10000):
            # os.urandom, not the secrets module: that one imports hmac and hashlib (~2.5 ms of every start).
            temp = self._directory / f".{int.from_bytes(os.urandom(4), 'little')}"
            try:
                return temp, os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
        raise FileExistsError(f"no free temporary file name in {self._directory}")

    def remove_stale_temp_files(self) -> list[str]:
        """Delete the temporary files of writes a crash cut short; returns their names.

        A process killed between creating its temp file and renaming it leaves the file behind, and the
        kubelet never removes them; after enough crashes they would fill the directory. Call this only
        while no write can run (at start, before the first write).
        """
        removed: list[str] = []
        for entry in os.scandir(self._directory):
            if _TEMP_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
        return removed

    def _stage(self, stage: str) -> None:
        if self._fault is not None:
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
        _fsync_directory(self._directory)
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
