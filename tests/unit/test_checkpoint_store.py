"""CheckpointStore on real files: durable atomic writes, reads that never crash, quarantine."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kubedevice.api.constants import CHECKPOINT_NAME
from kubedevice.checkpoint import (
    WRITE_STAGES,
    CheckpointData,
    CheckpointError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CheckpointStore,
    CheckpointUnreadableError,
    CorruptCheckpointError,
    PodDevicesEntry,
    encode,
)

OLD = CheckpointData(None, {"example.com/dev": ["a", "b"]})
NEW = CheckpointData(
    [PodDevicesEntry("pod", "ctr", "example.com/dev", {0: ["a"]}, b"\n\x00")],
    {"example.com/dev": ["a", "b"]},
)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_write_then_read(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    assert store.path == tmp_path / CHECKPOINT_NAME
    store.write(NEW)
    assert store.path.read_bytes() == encode(NEW)
    decoded = store.read()
    assert decoded.data == NEW and decoded.format_version == 2
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert _leftovers(tmp_path) == []


def test_write_replaces_the_old_file(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.write(OLD)
    store.write(NEW)
    assert store.read().data == NEW
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT_NAME]


def test_write_creates_the_directory_with_mode_0750(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "device-plugins"
    old_umask = os.umask(0o077)
    try:
        CheckpointStore(directory).write(OLD)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o750
    assert CheckpointStore(directory).read().data == OLD


def test_write_leaves_an_existing_directorys_mode_alone(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    CheckpointStore(tmp_path).write(OLD)
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755


def test_fault_hook_sees_every_stage_in_order(tmp_path: Path) -> None:
    seen: list[str] = []
    CheckpointStore(tmp_path, fault=seen.append).write(OLD)
    assert seen == list(WRITE_STAGES) == ["after-temp-write", "after-fsync", "after-rename"]


@pytest.mark.parametrize("stage", ["after-temp-write", "after-fsync"])
def test_failure_before_rename_keeps_the_old_file_and_removes_the_temp(tmp_path: Path, stage: str) -> None:
    CheckpointStore(tmp_path).write(OLD)

    def fail(at: str) -> None:
        if at == stage:
            raise OSError(28, "No space left on device")

    with pytest.raises(CheckpointError) as err:
        CheckpointStore(tmp_path, fault=fail).write(NEW)
    assert (
        str(err.value)
        == 'failed to write checkpoint file "kubelet_internal_checkpoint": [Errno 28] No space left on device'
    )
    assert CheckpointStore(tmp_path).read().data == OLD
    assert _leftovers(tmp_path) == []


def test_failure_after_rename_reports_but_the_new_file_is_in_place(tmp_path: Path) -> None:
    def fail(at: str) -> None:
        if at == "after-rename":
            raise OSError(5, "Input/output error")

    with pytest.raises(CheckpointError, match="failed to write checkpoint file"):
        CheckpointStore(tmp_path, fault=fail).write(NEW)
    assert CheckpointStore(tmp_path).read().data == NEW
    assert _leftovers(tmp_path) == []


def test_write_into_a_path_under_a_regular_file_fails_cleanly(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CheckpointError) as err:
        CheckpointStore(blocker / "dir").write(OLD)
    assert str(err.value).startswith('failed to write checkpoint file "kubelet_internal_checkpoint": ')


def test_write_over_a_directory_fails_and_removes_the_temp(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_NAME).mkdir()
    with pytest.raises(CheckpointError, match="failed to write checkpoint file"):
        CheckpointStore(tmp_path).write(OLD)
    assert _leftovers(tmp_path) == []


def test_write_of_invalid_data_fails_with_a_checkpoint_error(tmp_path: Path) -> None:
    bad = CheckpointData([PodDevicesEntry("p", "c", "r", {0: ["a"]}, "not bytes")], {})  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match="failed to write checkpoint file"):
        CheckpointStore(tmp_path).write(bad)
    assert list(tmp_path.iterdir()) == []


_CRASHER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from kubedevice.checkpoint import CheckpointData, CheckpointStore, PodDevicesEntry

    def crash(stage: str) -> None:
        if stage == sys.argv[2]:
            os._exit(17)  # die like a killed process: no cleanup, no flush

    data = CheckpointData([PodDevicesEntry("pod", "ctr", "example.com/dev", {0: ["a"]}, b"\\n\\x00")],
                          {"example.com/dev": ["a", "b"]})
    CheckpointStore(Path(sys.argv[1]), fault=crash).write(data)
    """
)


@pytest.mark.parametrize("stage", WRITE_STAGES)
def test_a_process_killed_inside_a_write_leaves_the_old_or_the_new_file(tmp_path: Path, stage: str) -> None:
    CheckpointStore(tmp_path).write(OLD)
    done = subprocess.run([sys.executable, "-c", _CRASHER, str(tmp_path), stage], capture_output=True)
    assert done.returncode == 17, done.stderr.decode()
    # Readable and verified either way; a crash after the rename already shows the new data.
    expected = NEW if stage == "after-rename" else OLD
    assert CheckpointStore(tmp_path).read().data == expected
    leftovers = _leftovers(tmp_path)
    assert all(re.fullmatch(r"\.[0-9]+", name) for name in leftovers)
    assert len(leftovers) == (0 if stage == "after-rename" else 1)


# ---------------------------------------------------------------------------------------------------------
# Reading bad files


def test_read_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFoundError) as err:
        CheckpointStore(tmp_path / "nowhere").read()
    assert str(err.value) == f"checkpoint is not found: {tmp_path / 'nowhere' / CHECKPOINT_NAME}"


@pytest.mark.parametrize(
    ("content", "error", "words"),
    [
        (b"", CheckpointFormatError, "empty"),
        (b"\x00\x01garbage", CheckpointFormatError, "invalid JSON at line 1, column 1"),
        (b'{"Data":{"PodDeviceEntries":[{"PodUID":"x', CheckpointFormatError, "invalid JSON"),
        (b'{"Data":{"RegisteredDevices":{"\xc3\x28":[]}}}', CheckpointFormatError, "invalid UTF-8"),
        (b'{"Checksum":' + b"1" * 10_000 + b"}", CheckpointFormatError, "Checksum"),
        (
            b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":7}',
            CorruptCheckpointError,
            "7",
        ),
    ],
)
def test_read_of_a_bad_file_is_a_one_line_error(
    tmp_path: Path, content: bytes, error: type[Exception], words: str
) -> None:
    store = CheckpointStore(tmp_path)
    store.path.write_bytes(content)
    with pytest.raises(error) as err:
        store.read()
    assert words in str(err.value) and "\n" not in str(err.value)
    assert store.path.read_bytes() == content  # reading never touches the file


def test_read_of_a_directory(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.path.mkdir()
    with pytest.raises(CheckpointUnreadableError) as err:
        store.read()
    assert isinstance(err.value, CheckpointFormatError)
    assert str(err.value) == f"cannot read {store.path}: not a regular file (a directory)"


def test_read_of_a_fifo_does_not_block(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    os.mkfifo(store.path)
    with pytest.raises(CheckpointUnreadableError, match="not a regular file"):
        store.read()


def test_read_follows_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    CheckpointStore(real).write(NEW)
    link_dir = tmp_path / "link"
    link_dir.mkdir()
    (link_dir / CHECKPOINT_NAME).symlink_to(real / CHECKPOINT_NAME)
    assert CheckpointStore(link_dir).read().data == NEW
    (real / CHECKPOINT_NAME).unlink()
    with pytest.raises(CheckpointNotFoundError):
        CheckpointStore(link_dir).read()


# ---------------------------------------------------------------------------------------------------------
# Quarantine and names


def test_quarantine_moves_the_file_aside(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.path.write_bytes(b"garbage")
    first = store.quarantine()
    assert not store.path.exists()
    assert first.parent == tmp_path
    assert re.fullmatch(rf"{CHECKPOINT_NAME}\.corrupt-\d{{8}}T\d{{6}}\.\d{{6}}Z(-\d+)?", first.name)
    assert first.read_bytes() == b"garbage"
    store.path.write_bytes(b"again")
    second = store.quarantine()
    assert second != first and second.read_bytes() == b"again"
    with pytest.raises(CheckpointNotFoundError):
        store.read()
    with pytest.raises(CheckpointNotFoundError):
        store.quarantine()


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "x" * 251, "sp ace"])
def test_invalid_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid checkpoint name"):
        CheckpointStore(tmp_path, name)


def test_other_names_are_separate_files(tmp_path: Path) -> None:
    CheckpointStore(tmp_path, "other_checkpoint-1.json").write(NEW)
    assert (tmp_path / "other_checkpoint-1.json").is_file()
    with pytest.raises(CheckpointNotFoundError):
        CheckpointStore(tmp_path).read()
