"""Reading a PodResources v1 socket (the kubelet's or the node daemon's) with every failure given a kind.

A fresh channel per read: after the kubelet restarts, a long-lived channel would wait out gRPC's reconnect
back-off (up to two minutes) before it saw the new socket; dialling a unix socket costs well under a
millisecond.
"""

from __future__ import annotations

import asyncio
import enum
import os

import grpc
import grpc.aio

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.inventory.model import PodResourcesView, view_of

#: A List of 10,000 pods is a few MiB; gRPC's 4 MiB default would refuse it.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
DEFAULT_TIMEOUT_S = 5.0


class ErrorKind(enum.StrEnum):
    """Why a read failed, as the exporter counts it."""

    MISSING = "missing"  # no socket file: the kubelet is not running, or the wrong path is mounted
    REFUSED = "refused"  # a socket file nobody answers on (UNAVAILABLE)
    RATE_LIMITED = "rate_limited"  # RESOURCE_EXHAUSTED: the kubelet's 100 QPS / burst 10 limit
    TIMEOUT = "timeout"  # DEADLINE_EXCEEDED
    PERMISSION = "permission"  # the socket exists but this user may not connect
    ERROR = "error"  # any other gRPC status (UNIMPLEMENTED on a kubelet without the API, ...)


class PodResourcesError(Exception):
    """A read failed; `kind` says how, str() is one line naming the socket."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_KINDS = {
    grpc.StatusCode.UNAVAILABLE: ErrorKind.REFUSED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorKind.RATE_LIMITED,
    grpc.StatusCode.DEADLINE_EXCEEDED: ErrorKind.TIMEOUT,
    grpc.StatusCode.PERMISSION_DENIED: ErrorKind.PERMISSION,
}


class PodResourcesReader:
    """`read()` asks List then GetAllocatableResources: two calls of the server's rate-limit budget."""

    CALLS_PER_READ = 2

    def __init__(self, socket: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket = socket
        self._target = "unix://" + os.path.abspath(socket)
        self._timeout = timeout

    async def read(self) -> PodResourcesView:
        await asyncio.to_thread(self._check_socket)
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            # No retries of our own making: a refused or rate-limited read is reported, not hidden.
            ("grpc.enable_retries", 0),
        ]
        try:
            async with grpc.aio.insecure_channel(self._target, options=options) as channel:
                stub = pr_grpc.PodResourcesListerStub(channel)
                listed = await stub.List(pr.ListPodResourcesRequest(), timeout=self._timeout)
                allocatable = await self._allocatable(stub)
        except grpc.aio.AioRpcError as err:
            raise self._error(err) from None
        return view_of(listed, allocatable)

    async def _allocatable(
        self, stub: pr_grpc.PodResourcesListerAsyncStub
    ) -> pr.AllocatableResourcesResponse | None:
        """None from a kubelet without GetAllocatableResources (before 1.21, or its feature gate off)."""
        try:
            answer: pr.AllocatableResourcesResponse = await stub.GetAllocatableResources(
                pr.AllocatableResourcesRequest(), timeout=self._timeout
            )
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNIMPLEMENTED or "not enabled" in (err.details() or ""):
                return None
            raise
        return answer

    def _check_socket(self) -> None:
        # A missing file is told apart from a dead server before dialling.
        try:
            os.stat(self.socket)
        except FileNotFoundError:
            raise PodResourcesError(ErrorKind.MISSING, f"no PodResources socket at {self.socket}") from None
        except OSError as err:
            raise PodResourcesError(
                ErrorKind.PERMISSION, f"cannot reach {self.socket}: {err.strerror or err}"
            ) from None

    def _error(self, err: grpc.aio.AioRpcError) -> PodResourcesError:
        code = err.code()
        details = (err.details() or "").strip().splitlines()
        what = details[0] if details else "no details"
        if code == grpc.StatusCode.UNAVAILABLE and "ermission denied" in what:
            return PodResourcesError(
                ErrorKind.PERMISSION, f"PodResources at {self.socket}: permission denied on the socket"
            )
        kind = _KINDS.get(code, ErrorKind.ERROR)
        name = code.name if code is not None else "UNKNOWN"
        return PodResourcesError(kind, f"PodResources at {self.socket}: {name}: {what}")
