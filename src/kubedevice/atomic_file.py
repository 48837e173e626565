"""Replacing a small file so that no reader ever sees half of it: temporary file, fsync, rename.

One way for every file kubedevice writes whole (state files, CDI specs, slice files, reports). The
checkpoints have their own store (kubedevice.checkpoint.store) with fault stages for crash tests.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(
    path: Path,
    data: bytes | str,
    *,
    mode: int | None = None,
    durable: bool = True,
    sync_folder: bool = False,
    prefix: str | None = None,
) -> None:
    """Replace `path` with `data` (text is written as UTF-8); its folder is created if missing.

    `mode` sets the file's permissions whatever the writer's umask (files other users read). `durable`
    fsyncs the file before the rename; `sync_folder` also fsyncs the folder after it, so the new name
    survives a power loss. The temporary file is `<prefix><random>.tmp` in the same folder (default prefix
    `.<name>.`, hidden) and is removed if anything fails.
    """
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(
        dir=folder, prefix=f".{path.name}." if prefix is None else prefix, suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync_folder:
        handle_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle_fd)
        finally:
            os.close(handle_fd)
