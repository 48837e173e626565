"""The standalone slice file, `<kubelet_dir>/resourceslices/<driver>.yaml`: written whole, atomically.

The node daemon rescans the folder whenever an entry changes, so the file is written to a hidden temporary
name (ending in `.tmp`, which the daemon skips) and renamed into place: it never reads half a pool.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from kubedevice.durable import replace_file
from kubedevice.plugin.dra.backend.slices import taint_times

SLICE_DIR_NAME = "resourceslices"


def slice_dir(kubelet_dir: Path) -> Path:
    return kubelet_dir / SLICE_DIR_NAME


def slice_file(kubelet_dir: Path, driver: str) -> Path:
    return slice_dir(kubelet_dir) / f"{driver}.yaml"


def render(driver: str, documents: list[dict[str, Any]]) -> str:
    header = (
        f"# The ResourceSlices of DRA driver {driver} on this node, written by its kubedevice plugin.\n"
        "# Rewritten whole when its devices change or when this file is deleted.\n"
    )
    return header + yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False)


def write(path: Path, text: str) -> None:
    """Write `text` to `path` (its folder created if missing) by temp file, fsync, rename and folder fsync."""
    # The daemon may run as another user than the plugin.
    replace_file(path, text, mode=0o644)


def _documents(path: Path) -> list[dict[str, Any]]:
    """The file's slice documents; none when it is missing or cannot be read."""
    with contextlib.suppress(OSError, yaml.YAMLError, UnicodeDecodeError):
        text = path.read_text(encoding="utf-8")
        return [
            d for d in yaml.safe_load_all(text) if isinstance(d, dict) and isinstance(d.get("spec"), dict)
        ]
    return []


def read_taint_times(path: Path) -> dict[tuple[str, str, str, str], datetime]:
    """(device name, key, value, effect) -> timeAdded of each taint in an existing slice file."""
    return taint_times(doc["spec"] for doc in _documents(path))


def read_generation(path: Path) -> int:
    """The highest pool generation in an existing slice file, 0 when there is none or it cannot be read.

    A restarted plugin continues from it, so the daemon never sees the pool's generation go backwards.
    """
    generations = [
        doc["spec"]["pool"]["generation"]
        for doc in _documents(path)
        if isinstance(doc["spec"].get("pool"), dict)
        and isinstance(doc["spec"]["pool"].get("generation"), int)
    ]
    return max(generations, default=0)
