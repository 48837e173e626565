"""The daemon's `resourceslices/` folder: every file wiped at start, read again on each change (inotify
and polling), another node's slice shown with its error, and a driver's wipe deleting its own files only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubedevice.controlplane.slice_folder import SliceFolder
from tests.node_helpers import ALIAS_BOMB, slice_yaml
from tests.waiting import poll_async


def write(folder: Path, name: str, text: str) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text)
    tmp.replace(folder / name)


@pytest.mark.parametrize("use_inotify", [True, False])
async def test_wiped_at_start_read_on_change_and_wiped_per_driver(tmp_path: Path, use_inotify: bool) -> None:
    folder = tmp_path / "resourceslices"
    folder.mkdir()
    write(folder, "left-over.yaml", slice_yaml("old", "gpu.example.com", "gpu-9"))
    changes: list[int] = []
    slices = SliceFolder(
        folder, "node-1", on_change=lambda: changes.append(1), use_inotify=use_inotify, poll_interval=0.05
    )
    await slices.start()
    try:
        assert list(folder.iterdir()) == []
        write(folder, "gpu.example.com.yaml", slice_yaml("a", "gpu.example.com", "gpu-0", "gpu-1"))
        write(folder, "extra-gpu.yaml", slice_yaml("b", "gpu.example.com", "gpu-2") + "---\n")
        write(
            folder,
            "mixed.yaml",
            slice_yaml("c", "gpu.example.com", "gpu-3", node="node-1")
            + "---\n"
            + slice_yaml("d", "nic.example.com", "eth0"),
        )
        write(folder, "other-node.yaml", slice_yaml("e", "gpu.example.com", "gpu-4", node="node-2"))
        await poll_async(lambda: len(slices.view()) == 5, "every slice to be read", 10.0, interval=0.02)
        assert changes
        assert slices.devices_by_driver() == {
            "gpu.example.com": ["a/gpu-0", "a/gpu-1", "b/gpu-2", "c/gpu-3"],
            "nic.example.com": ["d/eth0"],
        }
        assert slices.file_errors() == []
        ignored = next(s for s in slices.view() if s["name"] == "e")
        assert ignored == {
            "file": "other-node.yaml",
            "name": "e",
            "error": 'ResourceSlice e: published for node "node-2", this node is "node-1"; ignored',
        }
        assert next(s for s in slices.view() if s["name"] == "a")["error"] is None

        slices.wipe_driver("gpu.example.com")
        await poll_async(
            lambda: sorted(p.name for p in folder.iterdir()) == ["mixed.yaml", "other-node.yaml"],
            "the driver's own files to be deleted",
            10.0,
            interval=0.02,
        )
        await poll_async(lambda: len(slices.view()) == 3, "the folder to be read again", 10.0, interval=0.02)
    finally:
        await slices.stop()


async def test_bad_files_are_each_one_report_and_the_folder_is_still_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO, an alias bomb and 10,000 levels of YAML and JSON beside a good slice: each file is one
    report (one WARNING line, no traceback), the good slice is used, and a slice written after them, or
    after a change callback that failed, is still read."""
    folder = tmp_path / "resourceslices"
    folder.mkdir()
    failures = [RuntimeError("the callback failed once")]

    def on_change() -> None:
        if failures:
            raise failures.pop()

    slices = SliceFolder(folder, "node-1", on_change=on_change, poll_interval=0.05)
    await slices.start()
    try:
        os.mkfifo(folder / "fifo.yaml")
        write(folder, "bomb.yaml", ALIAS_BOMB)
        write(folder, "deep.yaml", "[" * 10_000 + "]" * 10_000 + "\n")
        write(folder, "deep.json", "[" * 10_000 + "]" * 10_000)
        write(folder, "good.yaml", slice_yaml("a", "gpu.example.com", "gpu-0"))
        await poll_async(
            lambda: len(slices.file_errors()) == 4 and len(slices.view()) == 1,
            "every file to be read",
            10.0,
            interval=0.02,
        )
        errors = {e["file"]: e["error"] for e in slices.file_errors()}
        assert errors["fifo.yaml"] == "not a regular file (a FIFO)"
        assert errors["deep.yaml"] == errors["deep.json"] == "nested deeper than 100 levels"
        assert errors["bomb.yaml"].startswith("document contains excessive aliasing")
        assert slices.devices_by_driver() == {"gpu.example.com": ["a/gpu-0"]}

        write(folder, "later.yaml", slice_yaml("b", "gpu.example.com", "gpu-1"))
        await poll_async(
            lambda: slices.devices_by_driver() == {"gpu.example.com": ["a/gpu-0", "b/gpu-1"]},
            "a slice written after them to be read",
            10.0,
            interval=0.02,
        )
    finally:
        await slices.stop()
    assert all(r.exc_info is None for r in caplog.records), "no traceback in the log"
    reports = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ResourceSlice file ")]
    for name in ("fifo.yaml", "bomb.yaml", "deep.yaml", "deep.json"):
        assert sum(m.startswith(f"ResourceSlice file {name}:") for m in reports) == 1, name
    assert any("the callback failed once" in r.getMessage() for r in caplog.records)


class _Fault(BaseException):
    """What no `except Exception` catches: the only way the follower can end but by stop() (a file's
    failure is that file's report, a read's is one log line)."""


async def test_a_follower_that_dies_is_started_again_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "resourceslices"
    folder.mkdir()
    faults = [_Fault("the change callback's fault")]

    def on_change() -> None:
        if faults:
            raise faults.pop()

    slices = SliceFolder(folder, "node-1", on_change=on_change, poll_interval=0.05)
    await slices.start()
    try:
        write(folder, "a.yaml", slice_yaml("a", "gpu.example.com", "gpu-0"))
        await poll_async(lambda: not faults, "the follower to die", 10.0, interval=0.02)
        # Started again: it reads the folder as it is, and every change after.
        await poll_async(lambda: len(slices.view()) == 1, "the slice read again", 10.0, interval=0.02)
        write(folder, "b.yaml", slice_yaml("b", "gpu.example.com", "gpu-1"))
        await poll_async(lambda: len(slices.view()) == 2, "a slice written after", 10.0, interval=0.02)
    finally:
        await slices.stop()
    stopped = [r.getMessage() for r in caplog.records if "stopped (" in r.getMessage()]
    assert stopped == [f"following {folder} stopped (_Fault: the change callback's fault): started again"]
