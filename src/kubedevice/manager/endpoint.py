"""One plugin connection: the gRPC channel, the ListAndWatch stream and the calls with their deadlines.

An endpoint is "stopped" once its stream ended or it was restored from the checkpoint without a plugin
(the kubelet's stopped endpoint); a stopped endpoint refuses every call. Every call carries a deadline, so
a hung plugin fails only the request that waits on it.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import grpc
import grpc.aio

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.manager.devices import Snapshot
from kubedevice.manager.errors import PluginCallError

log = logging.getLogger(__name__)

#: 100,000 devices with long IDs and topology exceed gRPC's 4 MiB default; the kubelet breaks there
#: (it refuses lists over about 150,000 devices), we do not.
MAX_RECEIVE_MESSAGE_BYTES = 256 * 1024 * 1024

CHANNEL_OPTIONS: Sequence[tuple[str, int | str]] = (
    ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
    ("grpc.default_authority", "localhost"),
)

SnapshotHandler = Callable[["Endpoint", Snapshot], Awaitable[None]]
_T = TypeVar("_T")
LIST_AND_WATCH = "/v1beta1.DevicePlugin/ListAndWatch"


def unix_target(socket_path: str) -> str:
    return "unix://" + socket_path if socket_path.startswith("/") else "unix:" + socket_path


def undialable(socket_path: str) -> str | None:
    """Why a dial of `socket_path` cannot succeed however long it waits, in gRPC-go's words; None when
    there is a socket to try.

    A plugin serves before it registers, so no socket at the endpoint (or a file that is not one) is
    final: the registration fails at once instead of holding its caller until the dial timeout, which
    is what the kubelet's blocking dial does (gRPC-go retries a missing socket until its 10 s deadline).
    Blocking (a stat): run it in a thread.
    """
    try:
        is_socket = stat.S_ISSOCK(os.stat(socket_path).st_mode)
    except OSError as err:
        reason = os.strerror(err.errno) if err.errno else str(err)
    else:
        if is_socket:
            return None
        reason = os.strerror(errno.ECONNREFUSED)  # what connect(2) answers for a file that is no socket
    return (
        'connection error: desc = "transport: Error while dialing: '
        f'dial unix {socket_path}: connect: {reason[:1].lower()}{reason[1:]}"'
    )


async def dial(socket_path: str, deadline: float) -> grpc.aio.Channel:
    """Open a channel to a unix socket and wait until it is connected (the kubelet's blocking dial), or
    fail at once when there is no socket to connect to."""
    reason = await asyncio.to_thread(undialable, socket_path)
    if reason is not None:
        raise PluginCallError(f"failed to dial device plugin: {reason}")
    channel = grpc.aio.insecure_channel(unix_target(socket_path), options=CHANNEL_OPTIONS)
    try:
        await asyncio.wait_for(channel.channel_ready(), deadline)
    except TimeoutError:
        await channel.close(None)
        raise PluginCallError(
            f"failed to dial device plugin: no connection to {socket_path} within {deadline:g} s"
        ) from None
    except BaseException:
        await channel.close(None)
        raise
    return channel


def describe_rpc_error(err: grpc.aio.AioRpcError, deadline: float | None) -> str:
    if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
        return f"deadline of {deadline:g} s exceeded"
    return f"rpc error: code = {err.code().name} desc = {err.details()}"


class Endpoint:
    """A plugin's DevicePlugin service at one socket path, for one resource."""

    def __init__(
        self,
        resource_name: str,
        socket_path: str,
        *,
        channel: grpc.aio.Channel | None = None,
        options: dp.DevicePluginOptions | None = None,
        stopped_at: float | None = None,
    ) -> None:
        self.resource_name = resource_name
        self.socket_path = socket_path
        self.options = options
        self._channel = channel
        self._stub: dp_grpc.DevicePluginAsyncStub | None = (
            dp_grpc.DevicePluginStub(channel) if channel is not None else None
        )
        self._stop_time = stopped_at
        #: Allocate and GetPreferredAllocation one at a time, in the order asked (the kubelet's admissions
        #: are serial; concurrent callers queue here, first come, first served).
        self._calls = asyncio.Lock()
        self._queued = 0  # callers waiting for their turn
        self._stream: grpc.aio.UnaryStreamCall[dp.Empty, Snapshot] | None = None
        self._closing = False
        #: monotonic time of connection, for ordering siblings
        self.connected_at = time.monotonic()

    def __repr__(self) -> str:
        state = "stopped" if self.is_stopped else "running"
        return f"<endpoint {self.resource_name} at {self.socket_path or '(none)'} {state}>"

    @classmethod
    def stopped(cls, resource_name: str, now: float) -> Endpoint:
        """An endpoint with no plugin behind it, as restored from the checkpoint."""
        return cls(resource_name, "", stopped_at=now)

    @classmethod
    async def connect(
        cls, resource_name: str, socket_path: str, *, dial_timeout: float, options_timeout: float
    ) -> Endpoint:
        """Dial the plugin and fetch its options; the registration succeeds only if both do."""
        channel = await dial(socket_path, dial_timeout)
        stub = dp_grpc.DevicePluginStub(channel)
        try:
            options = await stub.GetDevicePluginOptions(dp.Empty(), timeout=options_timeout)
        except grpc.aio.AioRpcError as err:
            await channel.close(None)
            raise PluginCallError(
                f"failed to get device plugin options: {describe_rpc_error(err, options_timeout)}"
            ) from None
        except BaseException:
            await channel.close(None)
            raise
        return cls(resource_name, socket_path, channel=channel, options=options)

    @property
    def is_stopped(self) -> bool:
        return self._stop_time is not None

    @property
    def stop_time(self) -> float | None:
        return self._stop_time

    def set_stop_time(self, now: float) -> None:
        self._stop_time = now

    def grace_period_expired(self, now: float, grace_period: float) -> bool:
        """Strictly more than the grace period since the stop."""
        return self._stop_time is not None and now - self._stop_time > grace_period

    async def list_and_watch(self, on_snapshot: SnapshotHandler) -> str:
        """Follow the stream until it ends; returns why it ended. Never reconnects."""
        if self._stub is None or self._channel is None:
            return "endpoint has no plugin"
        # Snapshots stay bytes until applied, so an unchanged device is never decoded (see devices.py).
        list_and_watch = self._channel.unary_stream(
            LIST_AND_WATCH, request_serializer=dp.Empty.SerializeToString, response_deserializer=Snapshot
        )
        try:
            self._stream = list_and_watch(dp.Empty())
            async for msg in self._stream:
                await on_snapshot(self, msg)
            return "stream closed by the plugin"
        except grpc.aio.AioRpcError as err:
            return describe_rpc_error(err, None)
        except asyncio.CancelledError:
            if self._closing:
                return "endpoint closed by the manager"
            raise

    def _require_stub(self) -> dp_grpc.DevicePluginAsyncStub:
        if self._stub is None or self.is_stopped:
            raise PluginCallError(
                f"endpoint {self.resource_name} at {self.socket_path or '(none)'} has been stopped"
            )
        return self._stub

    async def allocate(self, device_ids: Sequence[str], deadline: float) -> dp.AllocateResponse:
        stub = self._require_stub()
        req = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=device_ids)])
        try:
            return await self._in_turn(stub.Allocate, req, deadline)
        except grpc.aio.AioRpcError as err:
            raise PluginCallError(describe_rpc_error(err, deadline)) from None

    async def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int, deadline: float
    ) -> dp.PreferredAllocationResponse:
        stub = self._require_stub()
        req = dp.PreferredAllocationRequest(
            container_requests=[
                dp.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must_include, allocation_size=size
                )
            ]
        )
        try:
            return await self._in_turn(stub.GetPreferredAllocation, req, deadline)
        except grpc.aio.AioRpcError as err:
            raise PluginCallError(describe_rpc_error(err, deadline)) from None

    async def _in_turn(self, call: Callable[..., Awaitable[_T]], request: object, deadline: float) -> _T:
        """The call, once the calls asked before it are answered (and the endpoint still runs)."""
        self._queued += 1
        try:
            await self._calls.acquire()
        finally:
            self._queued -= 1
        try:
            self._require_stub()
            response = await call(request, timeout=deadline)
        finally:
            self._calls.release()
        if self._queued:
            # The next call goes out before this answer is used: grpc.aio sends a call from a task of its
            # own, so two steps of the loop put it on the wire before the caller's follow-up work runs.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        return response

    async def pre_start_container(self, device_ids: Sequence[str], deadline: float) -> None:
        stub = self._require_stub()
        try:
            await stub.PreStartContainer(
                dp.PreStartContainerRequest(devices_ids=device_ids), timeout=deadline
            )
        except grpc.aio.AioRpcError as err:
            raise PluginCallError(describe_rpc_error(err, deadline)) from None

    async def close(self) -> None:
        """Drop the connection; a running ListAndWatch ends with "closed by the manager"."""
        self._closing = True
        if self._stream is not None:
            self._stream.cancel()
        if self._channel is not None:
            await self._channel.close(None)
