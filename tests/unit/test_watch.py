"""The one directory watch (inotify, or polling where inotify cannot be used) on real directories."""

from __future__ import annotations

import logging
import os
import shutil
import socket
from pathlib import Path

import pytest

from kubedevice.watch import DirectoryWatch
from tests.waiting import short_tempdir


@pytest.fixture
def directory() -> Path:
    path = short_tempdir("kd-watch-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def entries(directory: Path) -> frozenset[str]:
    return frozenset(os.listdir(directory))


async def test_inotify_wakes_on_a_created_socket_and_a_written_file(directory: Path) -> None:
    watch = DirectoryWatch(directory, relevant=lambda name, _mask: name != "ignored")
    watch.start()
    try:
        assert watch.mode == "inotify"
        assert not await watch.wait_within(0.05)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(directory / "kubelet.sock"))
        assert await watch.wait_within(10)
        (directory / "pod.yaml").write_text("kind: Pod\n")
        assert await watch.wait_within(10)
        (directory / "ignored").write_text("x")
        assert not await watch.wait_within(0.2)
    finally:
        await watch.stop()
    assert watch.mode == "stopped"


async def test_polling_compares_the_state_it_is_given(directory: Path) -> None:
    watch = DirectoryWatch(
        directory, poll_state=lambda: entries(directory), poll_interval=0.01, use_inotify=False
    )
    watch.start()
    try:
        assert watch.mode == "polling"
        assert not await watch.wait_within(0.1)  # polls happened, nothing changed
        (directory / "a").write_text("x")
        assert await watch.wait_within(10)
    finally:
        await watch.stop()


async def test_polling_without_a_state_wakes_every_interval(directory: Path) -> None:
    watch = DirectoryWatch(directory, poll_interval=0.01, use_inotify=False)
    watch.start()
    try:
        assert await watch.wait_within(10)
    finally:
        await watch.stop()


async def test_a_removed_directory_falls_back_to_polling(directory: Path) -> None:
    watch = DirectoryWatch(directory, poll_state=lambda: directory.exists(), poll_interval=0.01)
    watch.start()
    try:
        shutil.rmtree(directory)
        assert await watch.wait_within(10)
        assert watch.mode == "polling"
        directory.mkdir()  # noqa: ASYNC240 (a test's own folder)
        assert await watch.wait_within(10)
    finally:
        await watch.stop()


async def test_a_missing_directory_polls_from_the_start(directory: Path) -> None:
    missing = directory / "not-yet"
    watch = DirectoryWatch(missing, poll_state=lambda: missing.exists(), poll_interval=0.01)
    watch.start()
    try:
        assert watch.mode == "polling"
        missing.mkdir()
        assert await watch.wait_within(10)
    finally:
        await watch.stop()


async def test_inotify_names_the_entries_that_changed_and_polling_names_none(directory: Path) -> None:
    watch = DirectoryWatch(directory, relevant=lambda name, _mask: name.endswith(".yaml"))
    watch.start()
    try:
        (directory / "a.yaml").write_text("x")
        (directory / "b.txt").write_text("x")
        staged = directory / "c.yaml.tmp"
        staged.write_text("x")
        os.rename(staged, directory / "c.yaml")
        (directory / "a.yaml").unlink()
        names: set[str] = set()
        while names != {"a.yaml", "c.yaml"}:
            assert await watch.wait_within(10)
            taken = watch.take_names()
            assert taken is not None
            names |= taken
        assert watch.take_names() == set()
    finally:
        await watch.stop()
    polled = DirectoryWatch(directory, poll_interval=0.01, use_inotify=False)
    polled.start()
    try:
        assert await polled.wait_within(10)
        assert polled.take_names() is None  # polling cannot tell which entries changed
    finally:
        await polled.stop()


async def test_a_missing_directory_is_waited_for_in_one_line(
    directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = directory / "device-plugins"
    watch = DirectoryWatch(missing, poll_state=missing.exists, poll_interval=0.01)
    with caplog.at_level(logging.DEBUG, logger="kubedevice.watch"):
        watch.start()
        try:
            assert watch.mode == "polling"
            assert not await watch.wait_within(0.05)  # several polls, nothing said again
            missing.mkdir()
            assert await watch.wait_within(10)
        finally:
            await watch.stop()
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [(logging.INFO, f"waiting for {missing} to exist (looking every 0.01s)")], said
