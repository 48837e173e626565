"""Replacing a file durably and atomically: temporary file in the same folder, fsync, rename, folder fsync.

A reader sees the old file or the new one, never half of one; a crash at any point leaves one of them
whole (and, after the folder's fsync, a power loss keeps the new one). A write a crash cut short leaves
only its temporary file behind, named so that :func:`remove_stale_temp_files` can find it and readers of
the folder skip it (a dot first: hidden; most names also end in ``.tmp``).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: The points of a write at which the fault hook is called, in order. Each leaves distinct files behind when
#: the process is killed there, which is what a crash-consistency test stops a writer at.
WRITE_STAGES: Final = ("after-temp-write", "after-fsync", "after-rename")
#: Called last, once the folder is fsynced: from here the new file survives a power loss too. Not a crash
#: stage (a process killed here leaves the same files as one killed after the rename).
FOLDER_SYNCED: Final = "after-folder-fsync"

#: The test hook of a write: called with each stage name; what it raises fails the write like an I/O error.
Fault = Callable[[str], None]

#: How many buffers one writev may take (IOV_MAX; POSIX guarantees at least 16, Linux has 1024).
_IOV_MAX: Final = max(16, os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16)


@dataclass(frozen=True, slots=True)
class TempNames:
    """How the temporary files of one file's writes are named: ``<prefix><random digits><suffix>``.

    The default for a file is :meth:`beside` it (``.<name>.<digits>.tmp``). The kubelet's checkpoints use
    Go's ``os.CreateTemp(dir, ".")`` names, ``.<digits>``.
    """

    prefix: str
    suffix: str = ".tmp"

    @classmethod
    def beside(cls, path: Path) -> TempNames:
        return cls(f".{path.name}.")

    def new(self) -> str:
        # os.urandom, not the secrets module: that one imports hmac and hashlib (~2.5 ms of every start).
        return f"{self.prefix}{int.from_bytes(os.urandom(4), 'little')}{self.suffix}"

    def pattern(self) -> re.Pattern[str]:
        """What :meth:`new` gives. With a suffix the name is specific enough to take letters in the random
        part too, as the names ``tempfile.mkstemp`` gave the same files before."""
        random = r"[a-z0-9_]+" if self.suffix else r"\d+"
        return re.compile(re.escape(self.prefix) + random + re.escape(self.suffix))


def replace_file(
    path: Path,
    data: bytes | str | Sequence[bytes],
    *,
    mode: int | None = None,
    temp: TempNames | None = None,
    folder_mode: int | None = None,
    fault: Fault | None = None,
) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8; pieces are written in order, never joined
    into one copy first): temporary file, fsync, rename, fsync of the folder. Blocking: from the event loop,
    run it on a thread.

    ``mode`` sets the file's permissions whatever the writer's umask (files other users read); without it
    the file is 0600. A missing folder is created (``folder_mode`` then sets its permissions exactly).
    ``temp`` names the temporary file (default :meth:`TempNames.beside`); it is removed if anything fails
    before the rename. ``fault`` is a test hook called at each of :data:`WRITE_STAGES`, then with
    :data:`FOLDER_SYNCED`.
    """
    folder = path.parent
    names = temp if temp is not None else TempNames.beside(path)
    pieces = [data.encode()] if isinstance(data, str) else [data] if isinstance(data, bytes) else data
    temp_path, fd = _create_temp(folder, names, folder_mode)
    try:
        try:
            _write_all(fd, pieces)
            _stage(fault, "after-temp-write")
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
            _stage(fault, "after-fsync")
        finally:
            os.close(fd)
        os.replace(temp_path, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_path)
        raise
    _stage(fault, "after-rename")
    fsync_folder(folder)
    _stage(fault, FOLDER_SYNCED)


def fsync_folder(folder: Path) -> None:
    """Make the folder's entries (a rename into it, a file created or removed) survive a power loss."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temp_files(folder: Path, names: TempNames) -> list[str]:
    """Delete the temporary files that writes a crash cut short left in ``folder``; returns their names.

    A process killed between creating its temporary file and renaming it leaves the file behind; after
    enough crashes they would fill the folder. Call this only while no write of these names can run (at
    start, before the first write). A missing folder has none.
    """
    pattern = names.pattern()
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return removed
    for entry in entries:
        if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.name)
    return removed


def _create_temp(folder: Path, names: TempNames, folder_mode: int | None) -> tuple[Path, int]:
    made_folder = False
    for _ in range(10000):
        temp = folder / names.new()
        try:
            return temp, os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        except FileNotFoundError:
            if made_folder:
                raise
            # Only now: a stat of the folder before every write would cost more than this rare retry.
            _make_folder(folder, folder_mode)
            made_folder = True
    raise FileExistsError(f"no free temporary file name in {folder}")


def _make_folder(folder: Path, mode: int | None) -> None:
    folder.mkdir(mode=0o777 if mode is None else mode, parents=True, exist_ok=True)
    if mode is not None:
        os.chmod(folder, mode)  # mkdir's mode is filtered by the umask


def _write_all(fd: int, pieces: Sequence[bytes]) -> None:
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


def _stage(fault: Fault | None, stage: str) -> None:
    if fault is not None:
        fault(stage)
