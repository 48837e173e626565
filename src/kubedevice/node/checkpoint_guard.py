"""An unreadable `dra_manager_state` at start: the daemon refuses to start, as the kubelet does, or moves the
file aside (`--dra-state-recovery move-aside`) and starts with no claims.

Checked before kubelet.sock is served, with the checkpoint package only: the DRA manager itself is loaded
once the device manager serves (plugins wait for kubelet.sock, not for DRA).
"""

from __future__ import annotations

import logging
from pathlib import Path

from kubedevice.checkpoint import (
    CheckpointError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    DRACheckpointStore,
)
from kubedevice.dra.errors import unreadable_checkpoint_text

log = logging.getLogger("kubedevice.node.daemon")

#: What to do, after the kubelet's own text, when the file cannot be read.
REFUSED_HINT = "drain the node and remove the file, or start again with --dra-state-recovery move-aside"


class DRACheckpointRefused(Exception):
    """The daemon must not start; str() is `<path>: <the kubelet's text> — <what to do>`."""


def check_dra_checkpoint(root: Path, recovery: str) -> Path | None:
    """Read `root/dra_manager_state` if it is there. Unreadable: raise DRACheckpointRefused (`refuse`) or
    move it aside and return its new path (`move-aside`), after one WARNING. Blocking: run it in a thread.
    A folder that cannot be used is left to the DRA manager, which says so under both settings."""
    store = DRACheckpointStore(root)
    try:
        store.read()
    except CheckpointNotFoundError:
        return None
    except (CorruptCheckpointError, CheckpointFormatError) as err:
        text = unreadable_checkpoint_text(store.path.name, err)
        if recovery != "move-aside":
            raise DRACheckpointRefused(f"{store.path}: {text} — {REFUSED_HINT}") from None
        try:
            moved = store.move_aside()
        except CheckpointError as move_err:
            raise DRACheckpointRefused(
                f"{store.path}: {text}; moving it aside failed: {move_err} — "
                "drain the node and remove the file"
            ) from None
        log.warning(
            "moved the unreadable DRA checkpoint %s aside to %s: claims prepared before are forgotten and "
            "driver state they hold may leak",
            store.path,
            moved,
        )
        return moved
    except CheckpointError:
        return None
    return None
