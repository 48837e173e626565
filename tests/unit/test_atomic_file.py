"""write_atomic: the whole file or the old one, never half; no temporary file left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubedevice.atomic_file import write_atomic


def test_replaces_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "state.json"
    write_atomic(path, "one")
    write_atomic(path, b"two", mode=0o644, sync_folder=True)
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(path.parent) == ["state.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_atomic(path, "old")
    with pytest.raises(TypeError):
        write_atomic(path, 7)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]
