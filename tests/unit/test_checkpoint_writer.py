"""Group-commit checkpoint writes on a real file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubedevice.checkpoint import CheckpointData, CheckpointStore
from kubedevice.checkpoint.writer import CheckpointWriteError, CheckpointWriter


def data(n: int) -> CheckpointData:
    return CheckpointData(pod_device_entries=None, registered_devices={"example.com/r": [f"d{n}"]})


async def test_concurrent_writes_are_grouped_and_the_last_state_lands(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    state = [0]
    writer = CheckpointWriter(store, lambda: data(state[0]))
    tasks = []
    for i in range(1, 51):
        state[0] = i
        tasks.append(asyncio.create_task(writer.write()))
    await asyncio.gather(*tasks)
    assert 1 <= writer.writes <= 3
    assert store.read().data == data(50)


async def test_sequential_writes_each_reach_disk(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    state = [0]
    writer = CheckpointWriter(store, lambda: data(state[0]))
    for i in range(3):
        state[0] = i
        await writer.write()
        assert store.read().data == data(i)
    assert writer.writes == 3


async def test_write_errors_name_the_file_and_later_writes_recover(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    writer = CheckpointWriter(store, lambda: data(1))
    store.path.mkdir()
    (store.path / "x").write_text("in the way")
    with pytest.raises(CheckpointWriteError, match="kubelet_internal_checkpoint"):
        await writer.write()
    (store.path / "x").unlink()
    store.path.rmdir()
    await writer.write()
    assert store.read().data == data(1)


async def test_request_logs_failures_and_drain_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = CheckpointStore(tmp_path / "missing-parent" / "dp")
    (tmp_path / "missing-parent").write_text("a file where a directory should be")
    writer = CheckpointWriter(store, lambda: data(1))
    writer.request()
    await writer.drain()  # waits for the requested write too
    assert "failed to write checkpoint" in caplog.text
