"""The daemon's own unix sockets: whether one is served already, and serving a gRPC service on one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import grpc.aio

from kubedevice.grpc_unix import UnixBindError, serve_unix
from kubedevice.node.config import NodeStartError

#: The daemon's sockets: owner and group only (plugins run as root or in the same group).
SOCKET_MODE = 0o660


async def socket_is_served(path: Path, wait: float = 1.0) -> bool:
    """True when some process accepts connections on the unix socket `path`."""
    try:
        async with asyncio.timeout(wait):
            _reader, writer = await asyncio.open_unix_connection(str(path))
    except TimeoutError:
        return True  # it exists and is listening, only too busy to accept
    except OSError:
        return False  # absent, or a stale file nobody serves
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def serve_grpc(path: Path, add_services: Callable[[grpc.aio.Server], None]) -> grpc.aio.Server:
    """A started gRPC server on `path` (a stale socket file there is replaced), mode SOCKET_MODE.

    Raises NodeStartError with one line when the socket cannot be served.
    """
    try:
        return await serve_unix(path, add_services, mode=SOCKET_MODE)
    except UnixBindError as err:
        raise NodeStartError(f"cannot serve {path}: {err.reason}") from None
