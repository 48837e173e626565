"""The plugin's own sockets: one gRPC server per socket, a fresh socket for every (re-)registration.

The kubelet tells endpoints apart by socket path, so each registration serves on a new path
(`<resource>-<pid>-<n>.sock`); the previous servers are retired once the new registration succeeded, and
every server is closed on stop, even one being started when stop() cancels the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from kubedevice.api.constants import DIAL_TIMEOUT_S
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.grpc_unix import UnixBindError, serve_unix
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.events import EventBus, EventKind
from kubedevice.plugin.naming import check_socket_path
from kubedevice.plugin.service import DevicePluginService, WatcherRegistrationService

log = logging.getLogger(__name__)

#: How long one try of the socket's self-check waits before looking whether the file is still there.
_CHECK_SLICE_S = 0.25
#: Fresh sockets deleted before they answered, in a row, before giving up.
_GONE_RETRIES = 10


@dataclass
class _Endpoint:
    """One gRPC server on one socket, with the service whose streams must end before it stops."""

    path: str
    server: grpc.aio.Server
    service: DevicePluginService


class PluginEndpoints:
    """The socket being served now, and the older ones still to be closed."""

    def __init__(
        self,
        plugin_dir: str,
        stem: str,
        make_service: Callable[[], DevicePluginService],
        events: EventBus,
        watcher_service: WatcherRegistrationService | None = None,
    ) -> None:
        self._plugin_dir = plugin_dir
        self._stem = stem
        self._make_service = make_service
        self._events = events
        self._watcher_service = watcher_service
        self._current: _Endpoint | None = None
        self._retired: list[_Endpoint] = []
        self._sequence = itertools.count()

    @property
    def socket_path(self) -> str | None:
        """Absolute path of the socket currently serving the DevicePlugin service, if any."""
        return self._current.path if self._current is not None else None

    def _next_socket_path(self) -> str:
        while True:
            path = os.path.join(self._plugin_dir, f"{self._stem}-{os.getpid()}-{next(self._sequence)}.sock")
            # A stale file from an earlier process with our pid (pid 1 in a container) is skipped,
            # not reused: the kubelet tells endpoints apart by socket path.
            if not os.path.lexists(path):
                return check_socket_path(path)

    async def serve_new(self) -> None:
        """Serve on a fresh socket, checked to answer; the one served until now is retired.

        A kubelet that starts removes every socket in the folder: one bound at that moment is gone before
        it could answer. That is no configuration error, so a fresh socket is served, a few times over.
        """
        for _ in range(_GONE_RETRIES):
            path = self._next_socket_path()
            endpoint = await self._serve(path)
            # Listed at once, so a stop() that cancels us half-way still closes this server: a gRPC
            # server left running past the event loop hangs interpreter exit (serve_unix stops one it
            # started when it is cancelled itself).
            self._retired.append(endpoint)
            try:
                await _check_answers(path)
            except (grpc.aio.AioRpcError, _SocketGone) as exc:
                self._retired.remove(endpoint)
                await _close(endpoint)
                if isinstance(exc, _SocketGone):
                    log.info(
                        "own socket %s was deleted before it answered (a kubelet restart?): serving anew",
                        path,
                    )
                    continue
                raise ConfigError(f"own socket {path} does not answer: {exc.details()}") from exc
            self._retired.remove(endpoint)
            if self._current is not None:
                self._retired.append(self._current)
            self._current = endpoint
            self._events.emit(EventKind.SERVING, endpoint=path)
            return
        raise ConfigError(
            f"own sockets in {self._plugin_dir} were deleted {_GONE_RETRIES} times in a row before "
            "they could answer — check what removes files from the plugin folder"
        )

    async def _serve(self, path: str) -> _Endpoint:
        service = self._make_service()

        def add_services(server: grpc.aio.Server) -> None:
            dp_grpc.add_DevicePluginServicer_to_server(service, server)
            if self._watcher_service is not None:
                reg_grpc.add_RegistrationServicer_to_server(self._watcher_service, server)

        try:
            server = await serve_unix(path, add_services)
        except UnixBindError as err:
            raise ConfigError(str(err)) from None
        return _Endpoint(path, server, service)

    async def retire_old(self) -> None:
        # Unlisted only once closed: if stop() cancels us mid-way, it closes the rest.
        while self._retired:
            endpoint = self._retired[0]
            await _close(endpoint)
            self._retired.remove(endpoint)

    async def close_all(self) -> None:
        endpoints = [*self._retired, *([self._current] if self._current else [])]
        self._retired, self._current = [], None
        for endpoint in endpoints:
            await _close(endpoint)


class _SocketGone(Exception):
    """The socket file was removed before the server behind it answered."""


async def _check_answers(path: str) -> None:
    """GetDevicePluginOptions on our own socket, as the kubelet dials it inside Register.

    Asked in short slices, so that a socket file deleted meanwhile is noticed at once rather than
    after the whole dial timeout (gRPC keeps reconnecting to a path that no longer exists).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DIAL_TIMEOUT_S
    async with grpc.aio.insecure_channel(f"unix://{path}") as channel:
        stub = dp_grpc.DevicePluginStub(channel)
        while True:
            remaining = deadline - loop.time()
            try:
                await stub.GetDevicePluginOptions(
                    dp.Empty(), timeout=min(_CHECK_SLICE_S, max(remaining, 0.001)), wait_for_ready=True
                )
                return
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise
                if not await asyncio.to_thread(os.path.lexists, path):
                    raise _SocketGone(path) from exc
                if remaining <= _CHECK_SLICE_S:
                    raise


async def _close(endpoint: _Endpoint) -> None:
    endpoint.service.close()
    await endpoint.server.stop(grace=1.0)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(endpoint.path)
