"""Test helpers for the plugin SDK: a fake kubelet registration server and deadline-bounded waits.

The fake kubelet does what the real one does inside Register (era B/C): it dials the
plugin's socket, calls GetDevicePluginOptions, and only then answers; ListAndWatch is then followed
in the background. Everything is real gRPC over real unix sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from kubedevice.api.constants import KUBELET_SOCKET_NAME
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from tests.waiting import poll, poll_async

DEADLINE_S = 20.0


async def wait_until(predicate: Callable[[], bool], deadline_s: float = DEADLINE_S, what: str = "") -> None:
    await poll_async(predicate, what or str(predicate), deadline_s)


def wait_until_sync(predicate: Callable[[], bool], deadline_s: float = DEADLINE_S, what: str = "") -> None:
    poll(predicate, what or str(predicate), deadline_s, interval=0.01)


def exists(path: str | None) -> bool:
    """Whether a file is at `path` (a plain sync stat, kept out of async test bodies)."""
    return path is not None and os.path.lexists(path)


def make_stale_socket(path: str) -> None:
    """Leave a socket file nobody listens on, as a crashed kubelet does (connecting is refused)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(path)


@pytest.fixture
def plugin_dir() -> Iterator[str]:
    """A short temporary directory: pytest's tmp_path can exceed the 107-byte unix socket limit."""
    path = tempfile.mkdtemp(prefix="kdp-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Registration:
    """One successful Register seen by the fake kubelet, and what it then read from the plugin."""

    request: dp.RegisterRequest
    options: dp.DevicePluginOptions
    #: Whether the plugin's socket answered GetDevicePluginOptions while Register was in progress.
    answered_during_register: bool
    channel: grpc.aio.Channel
    lists: list[dp.ListAndWatchResponse] = field(default_factory=list)
    stream_ended: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def stub(self) -> dp_grpc.DevicePluginAsyncStub:
        return dp_grpc.DevicePluginStub(self.channel)

    def health(self) -> dict[str, str]:
        """Device ID -> health string of the latest ListAndWatch message."""
        return {d.ID: d.health for d in self.lists[-1].devices} if self.lists else {}


class FakeKubelet(dp_grpc.RegistrationServicer):
    """Serves v1beta1.Registration on <dir>/kubelet.sock, as the kubelet's device manager does."""

    def __init__(self, directory: str, *, cleanup_on_start: bool = False) -> None:
        self.directory = directory
        self.socket = os.path.join(directory, KUBELET_SOCKET_NAME)
        self.cleanup_on_start = cleanup_on_start
        self.registrations: list[Registration] = []
        self.refuse: str | None = None
        self._server: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.changed = asyncio.Event()

    async def start(self) -> None:
        if self.cleanup_on_start:
            # What the real kubelet does at start: every socket but the checkpoint goes.
            for name in os.listdir(self.directory):
                path = os.path.join(self.directory, name)
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_ISSOCK(os.lstat(path).st_mode):
                        os.unlink(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket)
        self._server = grpc.aio.server()
        dp_grpc.add_RegistrationServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.socket}")
        await self._server.start()

    async def stop(self, remove_socket: bool = False) -> None:
        """Stop serving; like a dead kubelet, leave the socket file unless asked to remove it."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for registration in self.registrations:
            await registration.channel.close()
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        if remove_socket:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket)

    async def __aenter__(self) -> FakeKubelet:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def Register(self, request: dp.RegisterRequest, context: Any) -> dp.Empty:
        if self.refuse is not None:
            await context.abort(grpc.StatusCode.UNKNOWN, self.refuse)
        endpoint = os.path.join(self.directory, request.endpoint)
        channel = grpc.aio.insecure_channel(f"unix://{endpoint}")
        try:
            options = await dp_grpc.DevicePluginStub(channel).GetDevicePluginOptions(dp.Empty(), timeout=10)
        except grpc.aio.AioRpcError as exc:
            await channel.close()
            await context.abort(grpc.StatusCode.UNKNOWN, f"failed to dial device plugin: {exc.details()}")
        registration = Registration(request, options, True, channel)
        self.registrations.append(registration)
        self._tasks.append(asyncio.get_running_loop().create_task(self._follow(registration)))
        self._notify()
        return dp.Empty()

    async def _follow(self, registration: Registration) -> None:
        try:
            async for message in registration.stub.ListAndWatch(dp.Empty()):
                registration.lists.append(message)
                self._notify()
        except grpc.aio.AioRpcError:
            pass
        finally:
            registration.stream_ended.set()
            self._notify()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    @property
    def last(self) -> Registration:
        assert self.registrations, "no registration yet"
        return self.registrations[-1]

    async def wait_for(
        self, predicate: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S
    ) -> None:
        """Wait until `predicate` holds, re-checking on every registration or stream message."""
        try:
            async with asyncio.timeout(deadline_s):
                while not predicate():
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what}") from None

    async def wait_registrations(self, count: int, deadline_s: float = DEADLINE_S) -> Registration:
        await self.wait_for(lambda: len(self.registrations) >= count, f"{count} registrations", deadline_s)
        return self.registrations[count - 1]

    async def wait_health(self, expected: dict[str, str], deadline_s: float = DEADLINE_S) -> None:
        await self.wait_for(
            lambda: bool(self.registrations) and self.last.health() == expected,
            f"health {expected}",
            deadline_s,
        )
