"""replace_file: the whole new file or the old one, never half; synced to disk and its folder too; no
temporary file left behind; the temporary files a crash left are found and removed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kubedevice.durable import FOLDER_SYNCED, WRITE_STAGES, TempNames, remove_stale_temp_files, replace_file


def test_replaces_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "state.json"
    replace_file(path, "one")
    assert path.read_bytes() == b"one"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # private unless asked otherwise
    replace_file(path, b"two", mode=0o644)
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    replace_file(path, [b"th", b"", b"ree"])  # pieces, written in order
    assert path.read_bytes() == b"three"
    assert os.listdir(path.parent) == ["state.json"]


def test_a_missing_folder_is_made_with_the_mode_asked(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "file"
    replace_file(path, "x", folder_mode=0o750)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o750
    tmp_path.joinpath("open").mkdir(mode=0o755)
    replace_file(tmp_path / "open" / "file", "x", folder_mode=0o700)  # an existing folder is left alone
    assert stat.S_IMODE(tmp_path.joinpath("open").stat().st_mode) == 0o755


def test_the_hook_sees_every_stage_and_the_folder_fsync_last(tmp_path: Path) -> None:
    seen: list[str] = []
    replace_file(tmp_path / "file", "x", fault=seen.append)
    assert (
        seen
        == [*WRITE_STAGES, FOLDER_SYNCED]
        == [
            "after-temp-write",
            "after-fsync",
            "after-rename",
            "after-folder-fsync",
        ]
    )


@pytest.mark.parametrize("stage", ["after-temp-write", "after-fsync"])
def test_a_failure_before_the_rename_keeps_the_old_file_and_removes_the_temporary(
    tmp_path: Path, stage: str
) -> None:
    path = tmp_path / "state.json"
    replace_file(path, "old")

    def fail(at: str) -> None:
        if at == stage:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        replace_file(path, "new", fault=fail)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_data_that_is_not_bytes_fails_and_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    replace_file(path, "old")
    with pytest.raises(TypeError):
        replace_file(path, 7)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_a_folder_that_is_a_file_fails_cleanly(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError):
        replace_file(blocker / "dir" / "state.json", "x")
    assert os.listdir(tmp_path) == ["file"]


def test_temporary_names_are_hidden_and_found_again() -> None:
    beside = TempNames.beside(Path("/run/cdi/example.com-gpu.json"))
    name = beside.new()
    assert name.startswith(".example.com-gpu.json.") and name.endswith(".tmp")
    assert beside.pattern().fullmatch(name)
    assert beside.pattern().fullmatch(".example.com-gpu.json.ab12_xy9.tmp")  # tempfile.mkstemp's, earlier
    go = TempNames(".", "")
    assert go.pattern().fullmatch(go.new()) and go.new()[1:].isdigit()
    assert not go.pattern().fullmatch(".keep")  # only digits without a suffix: a dot file is not a temp


def test_stale_temporary_files_are_removed_and_nothing_else(tmp_path: Path) -> None:
    for name in (".123", ".4567.tmp", ".ab12_xy9.tmp", ".keep", "notes.txt", ".state.json.99.tmp"):
        (tmp_path / name).write_text("left by a crash")
    (tmp_path / ".42").mkdir()  # not a regular file: never removed
    assert sorted(remove_stale_temp_files(tmp_path, TempNames(".", ""))) == [".123"]
    assert sorted(remove_stale_temp_files(tmp_path, TempNames("."))) == [".4567.tmp", ".ab12_xy9.tmp"]
    assert remove_stale_temp_files(tmp_path / "missing", TempNames(".")) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".42", ".keep", ".state.json.99.tmp", "notes.txt"]


_CRASHER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from kubedevice.durable import replace_file

    def crash(stage: str) -> None:
        if stage == sys.argv[2]:
            os._exit(17)  # die like a killed process: no cleanup, no flush

    replace_file(Path(sys.argv[1]) / "state.json", "new", fault=crash)
    """
)


@pytest.mark.parametrize("stage", WRITE_STAGES)
def test_a_process_killed_inside_a_write_leaves_the_old_or_the_new_file(tmp_path: Path, stage: str) -> None:
    path = tmp_path / "state.json"
    replace_file(path, "old")
    done = subprocess.run([sys.executable, "-c", _CRASHER, str(tmp_path), stage], capture_output=True)
    assert done.returncode == 17, done.stderr.decode()
    assert path.read_text() == ("new" if stage == "after-rename" else "old")
    leftovers = remove_stale_temp_files(tmp_path, TempNames.beside(path))
    assert len(leftovers) == (0 if stage == "after-rename" else 1)
    assert os.listdir(tmp_path) == ["state.json"]
