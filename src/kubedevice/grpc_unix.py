"""Serving gRPC on a unix socket: the one way kubedevice starts a grpc.aio server (the daemon's, the
device manager's kubelet.sock, the SDK's plugin sockets, the conformance checker's kubelet).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import grpc.aio


class UnixBindError(Exception):
    """The socket cannot be served; str() is one line naming the path and why."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"cannot bind {path}: {reason}")
        self.path = path
        self.reason = reason


async def serve_unix(
    path: Path | str, add_services: Callable[[grpc.aio.Server], None], *, mode: int | None = None
) -> grpc.aio.Server:
    """A started gRPC server on the unix socket `path`, with the services `add_services` adds.

    Whatever is at `path` is removed first (a socket a crash left behind: the caller owns the name).
    `mode` sets the socket's permissions whatever the process umask (who may connect). Raises
    UnixBindError when the socket cannot be bound; a server that started is stopped again if anything
    after its start fails or the caller is cancelled, so no server outlives a failed call.
    """
    server = grpc.aio.server()
    add_services(server)
    await asyncio.to_thread(_remove, path)
    try:
        server.add_insecure_port(f"unix://{path}")
    except RuntimeError as err:
        raise UnixBindError(path, str(err)) from None
    try:
        await server.start()
        if mode is not None:
            await asyncio.to_thread(os.chmod, path, mode)
    except BaseException:
        await server.stop(grace=None)
        raise
    return server


def _remove(path: Path | str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
