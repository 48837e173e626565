"""A stand-in kubelet for the checker: the Registration service on kubelet.sock and the restart moves.

It judges each RegisterRequest the way the kubelet does (version, extended resource name, endpoint inside the
directory, then dial the plugin and ask its options, all inside Register) and keeps every attempt
so the checks can say exactly what went wrong. It does not manage devices: the checks drive the plugin.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from kubedevice.api.constants import KUBELET_SOCKET_NAME
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.grpc_unix import serve_unix
from kubedevice.manager.errors import RegistrationError
from kubedevice.manager.registration import check_resource_name, check_version, resolve_endpoint

#: The checker reads messages of any size so it can report their size instead of failing on them.
CHANNEL_OPTIONS = (("grpc.max_receive_message_length", -1),)


class Refusal(enum.Enum):
    """Why a registration was refused, in the order the kubelet checks."""

    VERSION = "version"
    RESOURCE_NAME = "resource name"
    ENDPOINT = "endpoint"
    NOT_SERVING = "socket not serving"
    OPTIONS = "GetDevicePluginOptions"


@dataclass(frozen=True)
class RegistrationAttempt:
    """One Register call as the kubelet saw it; `channel` is the open connection when it was accepted."""

    received_at: float
    request: dp.RegisterRequest
    refusal: Refusal | None = None
    message: str = ""
    socket_path: str | None = None
    options: dp.DevicePluginOptions | None = None
    channel: grpc.aio.Channel | None = None
    #: A short why for the report; `message` is the longer text the plugin got back.
    reason: str = ""

    @property
    def accepted(self) -> bool:
        return self.refusal is None


class _Registration(dp_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self._kubelet = kubelet

    async def Register(
        self, request: dp.RegisterRequest, context: grpc.aio.ServicerContext[dp.RegisterRequest, dp.Empty]
    ) -> dp.Empty:
        attempt = await self._kubelet.judge(request)
        self._kubelet.record(attempt)
        if not attempt.accepted:
            # The kubelet returns plain Go errors, which gRPC carries as Unknown.
            await context.abort(grpc.StatusCode.UNKNOWN, attempt.message)
        return dp.Empty()


class FakeKubelet:
    """kubelet.sock in `plugin_dir`: stopped, cleaned and created again like a restarting kubelet."""

    def __init__(self, plugin_dir: Path, dial_timeout_s: float) -> None:
        self.plugin_dir = plugin_dir
        self.socket_path = plugin_dir / KUBELET_SOCKET_NAME
        self._dial_timeout_s = dial_timeout_s
        self._server: grpc.aio.Server | None = None
        self._channels: set[grpc.aio.Channel] = set()
        self._attempts: asyncio.Queue[RegistrationAttempt] = asyncio.Queue()

    async def start(self) -> float:
        """Serve kubelet.sock; returns the loop time at which the socket appeared (plugins react to that)."""
        if self._server is not None:
            raise RuntimeError("the registration server is already running")
        registration = _Registration(self)
        self._server = await serve_unix(
            self.socket_path, lambda server: dp_grpc.add_RegistrationServicer_to_server(registration, server)
        )
        return asyncio.get_running_loop().time()

    async def stop(self) -> None:
        """Stop serving and drop every connection to the plugin, as a dying kubelet does.

        kubelet.sock goes away with it.
        """
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=0)
        channels, self._channels = self._channels, set()
        for channel in channels:
            await channel.close(None)
        await asyncio.to_thread(_remove_if_present, self.socket_path)

    async def clean_plugin_dir(self) -> list[str]:
        """What a starting kubelet does before it creates kubelet.sock: delete every socket in the dir."""
        return await asyncio.to_thread(_remove_sockets, self.plugin_dir)

    async def restart(self) -> float:
        """Stop, clean, start: the sequence a plugin sees when the kubelet restarts."""
        await self.stop()
        await self.clean_plugin_dir()
        return await self.start()

    async def next_attempt(self, timeout_s: float) -> RegistrationAttempt | None:
        """The next Register call, or None when none came within `timeout_s`."""
        try:
            return await asyncio.wait_for(self._attempts.get(), timeout=max(timeout_s, 0.0))
        except TimeoutError:
            return None

    def forget_attempts(self) -> list[RegistrationAttempt]:
        """Take the attempts not yet looked at, so a phase starts with a clean slate."""
        seen: list[RegistrationAttempt] = []
        while not self._attempts.empty():
            seen.append(self._attempts.get_nowait())
        return seen

    def record(self, attempt: RegistrationAttempt) -> None:
        self._attempts.put_nowait(attempt)

    async def judge(self, request: dp.RegisterRequest) -> RegistrationAttempt:
        """Validate and connect inside Register, in the kubelet's order; never raises."""
        received_at = asyncio.get_running_loop().time()

        def refused(
            kind: Refusal, message: str, socket_path: str | None = None, reason: str = ""
        ) -> RegistrationAttempt:
            return RegistrationAttempt(received_at, request, kind, message, socket_path, reason=reason)

        try:
            check_version(request.version)
        except RegistrationError as err:
            return refused(Refusal.VERSION, str(err))
        try:
            check_resource_name(request.resource_name)
        except RegistrationError as err:
            return refused(Refusal.RESOURCE_NAME, str(err))
        try:
            socket_path = await asyncio.to_thread(resolve_endpoint, self.plugin_dir, request.endpoint)
        except RegistrationError as err:
            return refused(Refusal.ENDPOINT, str(err))

        channel = grpc.aio.insecure_channel(f"unix://{socket_path}", options=CHANNEL_OPTIONS)
        stub = dp_grpc.DevicePluginStub(channel)
        try:
            # wait_for_ready=False: a socket that is missing or not yet serving fails now instead of being
            # retried, because the check is whether the plugin serves *before* it registers.
            options = await stub.GetDevicePluginOptions(
                dp.Empty(), timeout=self._dial_timeout_s, wait_for_ready=False
            )
        except grpc.aio.AioRpcError as err:
            await channel.close(None)
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                exists = await asyncio.to_thread(os.path.exists, socket_path)
                return refused(
                    Refusal.NOT_SERVING,
                    f"failed to dial device plugin: {socket_path} did not answer when Register was called "
                    f"({err.code().name}: {err.details()})",
                    socket_path,
                    f"{err.code().name}: "
                    + ("the socket did not answer" if exists else "no such socket file"),
                )
            return refused(
                Refusal.OPTIONS,
                f"failed to get device plugin options: {err.code().name}: {err.details()}",
                socket_path,
            )
        self._channels.add(channel)
        return RegistrationAttempt(received_at, request, None, "", socket_path, options, channel)


def _remove_if_present(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _remove_sockets(directory: Path) -> list[str]:
    removed: list[str] = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        try:
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                os.unlink(entry.path)
                removed.append(entry.name)
        except FileNotFoundError:
            continue
    return removed


def has_socket(directory: Path, ignore: set[str]) -> bool:
    """Whether `directory` holds a unix socket other than those named in `ignore` (hidden names aside)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return False
    for entry in entries:
        if entry.name in ignore or entry.name.startswith("."):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                return True
    return False
