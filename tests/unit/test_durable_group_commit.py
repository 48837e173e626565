"""GroupCommit on real files: a caller returns only once a write that began after its change is on disk;
callers that ask while a write runs share the next one; one write at a time, even when callers are
cancelled; a failed write raises in every caller that waited for it.

The writes are held in their thread by a gate the test opens, so what runs when is decided by the test,
never by timing. The fsyncs are counted by replace_file's hook (its folder-synced stage).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kubedevice.durable import FOLDER_SYNCED, GroupCommit, replace_file

WAIT_S = 10.0


@dataclass
class GatedFile:
    """A file written by GroupCommit, each write waiting in its thread until the test lets it go on."""

    path: Path
    state: int = 0
    gated: bool = True
    #: The value each write read when it began, in order.
    began: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    folder_syncs: int = 0
    _gate: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _running: int = 0
    most_running: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    loop: asyncio.AbstractEventLoop = field(init=False)
    commit: GroupCommit = field(init=False)

    def __post_init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.commit = GroupCommit.threaded(lambda: str(self.state), self._write, name="write test file")

    def _write(self, text: str) -> None:
        with self._lock:
            self._running += 1
            self.most_running = max(self.most_running, self._running)
        try:
            self.loop.call_soon_threadsafe(self.began.put_nowait, text)
            if self.gated and not self._gate.acquire(timeout=WAIT_S):
                raise TimeoutError("the test never let the write go on")
            replace_file(self.path, text, fault=self._count)
        finally:
            with self._lock:
                self._running -= 1

    def _count(self, stage: str) -> None:
        if stage == FOLDER_SYNCED:
            with self._lock:
                self.folder_syncs += 1

    def let_one_write_finish(self) -> None:
        self._gate.release()

    async def next_write_began(self) -> str:
        return await asyncio.wait_for(self.began.get(), WAIT_S)


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[GatedFile]:
    file = GatedFile(tmp_path / "state")
    yield file
    file.gated = False
    for _ in range(10):  # a failed test must not leave a thread waiting at the gate
        file.let_one_write_finish()


async def test_a_write_that_began_before_a_change_does_not_satisfy_it(gated: GatedFile) -> None:
    gated.state = 1
    first = asyncio.create_task(gated.commit.commit())
    assert await gated.next_write_began() == "1"
    gated.state = 2  # the running write read the state before this change
    second = asyncio.create_task(gated.commit.commit())
    gated.let_one_write_finish()
    await first
    assert gated.path.read_text() == "1"
    assert await gated.next_write_began() == "2"
    assert not second.done()  # the write of "1" finished, but it began before the change
    gated.let_one_write_finish()
    await second
    assert gated.path.read_text() == "2"
    assert gated.commit.writes == gated.folder_syncs == 2


async def test_callers_that_ask_while_a_write_runs_share_the_next_one(gated: GatedFile) -> None:
    gated.state = 0
    first = asyncio.create_task(gated.commit.commit())
    assert await gated.next_write_began() == "0"

    async def change_and_commit(value: int) -> None:
        gated.state = value
        await gated.commit.commit()
        assert int(gated.path.read_text()) >= value  # on disk when the caller returns

    callers = [asyncio.create_task(change_and_commit(i)) for i in range(1, 21)]
    await asyncio.sleep(0)  # a yield, not a wait: every caller has run up to its commit
    gated.let_one_write_finish()
    assert await gated.next_write_began() == "20"  # one write for the twenty changes
    gated.let_one_write_finish()
    await asyncio.gather(first, *callers)
    assert gated.path.read_text() == "20"
    assert gated.commit.writes == gated.folder_syncs == 2  # each write fsynced the file's folder
    assert gated.most_running == 1


async def test_a_cancelled_caller_stops_waiting_but_not_the_write(gated: GatedFile) -> None:
    gated.state = 1
    cancelled = asyncio.create_task(gated.commit.commit())
    assert await gated.next_write_began() == "1"
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    gated.state = 2
    later = asyncio.create_task(gated.commit.commit())
    await asyncio.sleep(0)
    assert gated.began.empty()  # no second write while the first still runs in its thread
    gated.let_one_write_finish()
    assert await gated.next_write_began() == "2"
    assert gated.path.read_text() == "1"  # the cancelled caller's write finished all the same
    gated.let_one_write_finish()
    await later
    assert gated.path.read_text() == "2"
    assert gated.most_running == 1


async def test_a_failed_write_raises_in_every_caller_that_waited_for_it(tmp_path: Path) -> None:
    blocker = tmp_path / "folder"
    blocker.write_text("a file where the folder should be")
    state = ["one"]
    commit = GroupCommit.threaded(
        lambda: state[0], lambda text: replace_file(blocker / "state", text), name="t"
    )
    results = await asyncio.gather(*(commit.commit() for _ in range(3)), return_exceptions=True)
    assert [type(r) for r in results] == [NotADirectoryError] * 3
    assert commit.writes == 0
    blocker.unlink()
    blocker.mkdir()
    await commit.commit()  # the next caller writes again
    assert (blocker / "state").read_text() == "one"
    assert commit.writes == 1


async def test_a_request_is_reported_once_when_it_fails_and_drain_waits_for_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "folder"
    blocker.write_text("a file where the folder should be")
    errors: list[Exception] = []
    commit = GroupCommit.threaded(
        lambda: "x",
        lambda text: replace_file(blocker / "state", text),
        name="t",
        on_request_error=errors.append,
    )
    commit.request()
    commit.request()  # shares the write asked for just before
    await commit.drain()
    assert [type(e) for e in errors] == [NotADirectoryError]
    logged = GroupCommit.threaded(lambda: "x", lambda text: replace_file(blocker / "s", text), name="write s")
    with caplog.at_level(logging.ERROR):
        logged.request()
        await logged.drain()
    assert "write s: [Errno 20] Not a directory" in caplog.text


async def test_nothing_to_write_is_no_write(tmp_path: Path) -> None:
    path = tmp_path / "state"
    state: list[str | None] = [None]
    commit = GroupCommit.threaded(lambda: state[0], lambda text: replace_file(path, text), name="t")
    await commit.commit()
    assert not path.exists() and commit.writes == 0
    state[0] = "x"
    await commit.commit()
    assert path.read_text() == "x" and commit.writes == 1


async def test_a_caller_that_changes_the_state_again_at_once_joins_the_next_write(gated: GatedFile) -> None:
    async def twice() -> None:
        gated.state = 1
        await gated.commit.commit()
        gated.state = 3  # the next pod, right after the write of the last one
        await gated.commit.commit()

    first = asyncio.create_task(twice())
    assert await gated.next_write_began() == "1"
    gated.state = 2
    second = asyncio.create_task(gated.commit.commit())  # asks while the write of "1" runs
    await asyncio.sleep(0)  # a yield, not a wait: it has asked
    gated.let_one_write_finish()
    assert await gated.next_write_began() == "3"  # the change made on waking shares the next write
    gated.let_one_write_finish()
    await asyncio.gather(first, second)
    assert gated.path.read_text() == "3"
    assert gated.commit.writes == 2
