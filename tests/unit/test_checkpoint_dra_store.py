"""DRACheckpointStore on real files: read or create, durable writes that survive kill points, move aside."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from kubedevice.api.constants import DRA_CHECKPOINT_NAME
from kubedevice.checkpoint import (
    WRITE_STAGES,
    CheckpointDirectoryError,
    CheckpointError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CheckpointUnreadableError,
    ClaimInfoState,
    CorruptDRACheckpointError,
    DRACheckpointData,
    DRACheckpointStore,
    DRADevice,
    encode_dra,
)
from tests.dra_vectors import vector_file

OLD = DRACheckpointData(
    (ClaimInfoState("u-1", "old", "default", frozenset({"pod-a"}), {"gpu.example.com": None}),)
)
NEW = DRACheckpointData(
    (
        ClaimInfoState(
            "u-2",
            "new",
            "default",
            frozenset({"pod-a", "pod-b"}),
            {"gpu.example.com": (DRADevice("node-1", "gpu-0", ("gpu",), ("gpu.example.com/gpu=gpu-0",)),)},
        ),
    )
)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_read_or_create_of_a_missing_file_writes_c2(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    assert store.path == tmp_path / DRA_CHECKPOINT_NAME == tmp_path / "dra_manager_state"
    assert store.read_or_create() == DRACheckpointData(None)
    assert store.path.read_bytes() == vector_file("C2")
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert _leftovers(tmp_path) == []
    assert store.read_or_create() == DRACheckpointData(None)  # now read, not created


def test_read_or_create_makes_a_missing_directory(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path / "root" / "dir")
    assert store.read_or_create() == DRACheckpointData(None)
    assert store.path.read_bytes() == vector_file("C2")


def test_read_or_create_of_an_existing_file_reads_it(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    store.path.write_bytes(vector_file("C5"))
    data = store.read_or_create()
    assert data.claims is not None and data.claims[0].claim_name == "example"
    assert store.path.read_bytes() == vector_file("C5")  # an old-format file is not rewritten by a read
    store.write(data)
    assert store.path.read_bytes() == vector_file("C6")  # the next write uses ClaimInfoStateList


C4_CHECKSUM_1 = vector_file("C4").replace(b'"Checksum":1582256999', b'"Checksum":1')


@pytest.mark.parametrize(
    ("content", "error", "text"),
    [
        (C4_CHECKSUM_1, CorruptDRACheckpointError, "checkpoint is corrupted"),
        (b"{", CheckpointFormatError, "invalid JSON at line 1, column 2: "),
        (b"", CheckpointFormatError, "invalid JSON: the file is empty"),
    ],
)
def test_read_or_create_of_a_bad_file_raises_and_leaves_it(
    tmp_path: Path, content: bytes, error: type[Exception], text: str
) -> None:
    store = DRACheckpointStore(tmp_path)
    store.path.write_bytes(content)
    with pytest.raises(error) as err:
        store.read_or_create()
    assert str(err.value).startswith(text)
    assert store.path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == [DRA_CHECKPOINT_NAME]


def test_read_or_create_in_an_unusable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CheckpointDirectoryError) as err:
        DRACheckpointStore(blocker).read_or_create()
    assert str(err.value) == f"cannot use checkpoint directory {blocker}: not a directory"
    with pytest.raises(CheckpointDirectoryError) as err:
        DRACheckpointStore(blocker / "below").read_or_create()
    assert str(err.value) == f"cannot use checkpoint directory {blocker / 'below'}: Not a directory"
    assert isinstance(err.value, CheckpointError) and "[Errno" not in str(err.value)


def test_read_or_create_when_the_file_is_a_directory(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    store.path.mkdir()
    with pytest.raises(CheckpointUnreadableError) as err:
        store.read_or_create()
    assert str(err.value) == f"cannot read {store.path}: not a regular file (a directory)"


def test_a_fault_while_creating_is_a_directory_error_and_leaves_nothing(tmp_path: Path) -> None:
    def fail(stage: str) -> None:
        if stage == "after-fsync":
            raise OSError(28, "No space left on device")

    with pytest.raises(CheckpointDirectoryError) as err:
        DRACheckpointStore(tmp_path, fault=fail).read_or_create()
    assert str(err.value) == (
        f"cannot use checkpoint directory {tmp_path}: cannot create dra_manager_state in it: "
        "No space left on device"
    )
    assert list(tmp_path.iterdir()) == []


def test_write_then_read(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    store.write(NEW)
    assert store.path.read_bytes() == encode_dra(NEW)
    assert store.read() == NEW == store.read_or_create()
    store.write(OLD)
    assert store.read() == OLD
    assert [p.name for p in tmp_path.iterdir()] == [DRA_CHECKPOINT_NAME]


def test_fault_hook_sees_every_stage_in_order(tmp_path: Path) -> None:
    seen: list[str] = []
    DRACheckpointStore(tmp_path, fault=seen.append).write(OLD)
    assert seen == list(WRITE_STAGES)


@pytest.mark.parametrize("stage", ["after-temp-write", "after-fsync"])
def test_failure_before_rename_keeps_the_old_file(tmp_path: Path, stage: str) -> None:
    DRACheckpointStore(tmp_path).write(OLD)

    def fail(at: str) -> None:
        if at == stage:
            raise OSError(28, "No space left on device")

    with pytest.raises(CheckpointError, match='failed to write checkpoint file "dra_manager_state"'):
        DRACheckpointStore(tmp_path, fault=fail).write(NEW)
    assert DRACheckpointStore(tmp_path).read() == OLD
    assert _leftovers(tmp_path) == []


def test_write_of_invalid_data_fails_with_a_checkpoint_error(tmp_path: Path) -> None:
    bad = DRACheckpointData((ClaimInfoState("u", "c", "n", frozenset({1}), None),))  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match='failed to write checkpoint file "dra_manager_state"'):
        DRACheckpointStore(tmp_path).write(bad)
    assert list(tmp_path.iterdir()) == []


_CRASHER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from kubedevice.checkpoint import ClaimInfoState, DRACheckpointData, DRACheckpointStore, DRADevice

    def crash(stage: str) -> None:
        if stage == sys.argv[2]:
            os._exit(17)  # die like a killed process: no cleanup, no flush

    device = DRADevice("node-1", "gpu-0", ("gpu",), ("gpu.example.com/gpu=gpu-0",))
    pods = frozenset({"pod-a", "pod-b"})
    claim = ClaimInfoState("u-2", "new", "default", pods, {"gpu.example.com": (device,)})
    store = DRACheckpointStore(Path(sys.argv[1]), fault=crash)
    if sys.argv[3] == "create":
        store.read_or_create()
    else:
        store.write(DRACheckpointData((claim,)))
    """
)


@pytest.mark.parametrize("stage", WRITE_STAGES)
def test_a_process_killed_inside_a_write_leaves_the_old_or_the_new_file(tmp_path: Path, stage: str) -> None:
    DRACheckpointStore(tmp_path).write(OLD)
    done = subprocess.run(
        [sys.executable, "-c", _CRASHER, str(tmp_path), stage, "write"], capture_output=True
    )
    assert done.returncode == 17, done.stderr.decode()
    # Verified either way, never a mix; a crash after the rename already shows the new data.
    expected = NEW if stage == "after-rename" else OLD
    store = DRACheckpointStore(tmp_path)
    assert store.read() == expected
    assert store.path.read_bytes() == encode_dra(expected)
    leftovers = _leftovers(tmp_path)
    assert len(leftovers) == (0 if stage == "after-rename" else 1)
    assert store.remove_stale_temp_files() == leftovers
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("stage", WRITE_STAGES)
def test_a_process_killed_while_creating_the_file_leaves_none_or_c2(tmp_path: Path, stage: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CRASHER, str(tmp_path), stage, "create"], capture_output=True
    )
    assert done.returncode == 17, done.stderr.decode()
    store = DRACheckpointStore(tmp_path)
    assert store.path.exists() == (stage == "after-rename")
    assert store.read_or_create() == DRACheckpointData(None)
    assert store.path.read_bytes() == vector_file("C2")


# ---------------------------------------------------------------------------------------------------------
# Moving a bad file aside


def test_move_aside_names_the_file_by_utc_second(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    store.path.write_bytes(b"garbage")
    moved = store.move_aside()
    assert moved.parent == tmp_path and not store.path.exists()
    assert re.fullmatch(r"dra_manager_state\.corrupt-\d{8}T\d{6}Z", moved.name)
    assert moved.read_bytes() == b"garbage"


def test_move_aside_adds_a_suffix_when_the_name_is_taken(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    # A local time elsewhere is named by its UTC time.
    now = datetime(2026, 12, 4, 23, 30, 5, 999_999, tzinfo=timezone(timedelta(hours=-2)))
    names = []
    for content in (b"one", b"two", b"three"):
        store.path.write_bytes(content)
        names.append(store.move_aside(now=now).name)
    assert names == [
        "dra_manager_state.corrupt-20261205T013005Z",
        "dra_manager_state.corrupt-20261205T013005Z-1",
        "dra_manager_state.corrupt-20261205T013005Z-2",
    ]
    assert (tmp_path / names[2]).read_bytes() == b"three"
    assert store.read_or_create() == DRACheckpointData(None)  # a fresh file after moving the bad one
    assert store.path.read_bytes() == vector_file("C2")
    later = store.move_aside(now=datetime(2026, 12, 5, 1, 30, 6, tzinfo=UTC))
    assert later.name == "dra_manager_state.corrupt-20261205T013006Z"


def test_move_aside_without_a_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFoundError):
        DRACheckpointStore(tmp_path).move_aside()


def test_a_dangling_symlink_counts_as_taken(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    (tmp_path / "dra_manager_state.corrupt-20260102T030405Z").symlink_to(tmp_path / "nowhere")
    store.path.write_bytes(b"x")
    assert store.move_aside(now=now).name == "dra_manager_state.corrupt-20260102T030405Z-1"
    assert os.path.islink(tmp_path / "dra_manager_state.corrupt-20260102T030405Z")
