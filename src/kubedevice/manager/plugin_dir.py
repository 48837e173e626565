"""The device plugin directory at start: created 0750 when missing, stale sockets removed (the checkpoint
and other files stay), as the kubelet's manager does before it serves kubelet.sock.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def make_plugin_dir(directory: Path) -> None:
    if not directory.is_dir():
        directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        # mkdir's mode is filtered by the umask; the kubelet's directory is exactly 0750.
        os.chmod(directory, 0o750)


def clean_plugin_dir(directory: Path, checkpoint_name: str) -> list[str]:
    """Remove stale unix sockets; the checkpoint, directories and other files stay."""
    removed: list[str] = []
    errors: list[str] = []
    for entry in os.scandir(directory):
        if entry.name == checkpoint_name:
            continue
        try:
            if not stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                continue
            os.unlink(entry.path)
            removed.append(entry.name)
        except FileNotFoundError:
            continue
        except OSError as err:
            errors.append(f"{entry.path}: {err.strerror or err}")
    if errors:
        raise OSError(f"cannot clean the device plugin directory {directory}: " + "; ".join(errors))
    return removed


def plugin_dir_is_empty(directory: Path) -> bool:
    """No entry but hidden ones: the node looks new (the kubelet's ShouldResetExtendedResourceCapacity)."""
    try:
        return not any(not e.name.startswith(".") for e in os.scandir(directory))
    except OSError:
        return False
