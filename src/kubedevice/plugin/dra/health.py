"""DRAResourceHealth v1 and v1alpha1 (one implementation): the driver's device health as a stream.

Every message is the complete list of the driver's DRA devices. A device that disappeared is sent once
more as UNKNOWN, in the first message after it went, then dropped. The list is sent again at least every
`resend_interval` seconds, so that the kubelet, which reads a device not re-reported within 30 s as
Unknown, never does so for a quiet plugin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import grpc

from kubedevice.api.drahealth.v1 import api_pb2 as v1
from kubedevice.api.drahealth.v1 import api_pb2_grpc as v1_grpc
from kubedevice.api.drahealth.v1alpha1 import api_pb2 as v1alpha1
from kubedevice.api.drahealth.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from kubedevice.plugin.dra.backend.slices import device_name as slice_device_name
from kubedevice.plugin.model import Device

Context = grpc.aio.ServicerContext[Any, Any]

#: At most this long between two messages of a stream, in seconds.
RESEND_INTERVAL_S = 10.0

HEALTHY, UNHEALTHY, UNKNOWN = 1, 2, 0


@dataclass(frozen=True)
class HealthSnapshot:
    version: int
    #: (device name, health) of the current devices, then of the devices gone in this version.
    current: tuple[tuple[str, int], ...]
    gone: tuple[str, ...]


class HealthFeed:
    """The latest health snapshot; each change wakes every stream."""

    def __init__(self) -> None:
        self._snapshot = HealthSnapshot(0, (), ())
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self.ready = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self._closing.is_set()

    def close(self) -> None:
        """End every stream, so the gRPC server can stop without waiting out its grace period."""
        self._closing.set()

    @property
    def snapshot(self) -> HealthSnapshot:
        return self._snapshot

    def update(self, devices: Sequence[Device]) -> None:
        current = tuple((slice_device_name(d.id), HEALTHY if d.healthy else UNHEALTHY) for d in devices)
        self.ready.set()
        if current == self._snapshot.current:
            return
        names = {name for name, _ in current}
        gone = tuple(name for name, _ in self._snapshot.current if name not in names)
        self._snapshot = HealthSnapshot(self._snapshot.version + 1, current, gone)
        woken, self._changed = self._changed, asyncio.Event()
        woken.set()

    async def wait_change(self, within: float) -> None:
        """Return at the next change, when closed, or after `within` seconds, whichever comes first."""
        changed = asyncio.ensure_future(self._changed.wait())
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({changed, closing}, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            closing.cancel()


class _HealthStream:
    def __init__(
        self, feed: HealthFeed, pool: Callable[[], str], pb: ModuleType, resend_interval: float
    ) -> None:
        self._feed = feed
        self._pool = pool
        self._pb = pb
        self._resend = resend_interval

    async def stream(self) -> AsyncIterator[Any]:
        await self._feed.ready.wait()
        sent_version = -1
        while not self._feed.closed:
            snapshot = self._feed.snapshot
            yield self._message(snapshot, with_gone=snapshot.version != sent_version)
            sent_version = snapshot.version
            if self._feed.snapshot.version == sent_version:
                await self._feed.wait_change(self._resend)

    def _message(self, snapshot: HealthSnapshot, with_gone: bool) -> Any:
        pb, pool, now = self._pb, self._pool(), int(time.time())
        entries = [*snapshot.current, *((name, UNKNOWN) for name in (snapshot.gone if with_gone else ()))]
        return pb.NodeWatchResourcesResponse(
            devices=[
                pb.DeviceHealth(
                    device=pb.DeviceIdentifier(pool_name=pool, device_name=name),
                    health=health,
                    last_updated_time=now,
                    health_check_timeout_seconds=0,
                )
                for name, health in entries
            ]
        )


class HealthV1(v1_grpc.DRAResourceHealthServicer):
    def __init__(self, feed: HealthFeed, pool: Callable[[], str], resend: float = RESEND_INTERVAL_S) -> None:
        self._stream = _HealthStream(feed, pool, v1, resend)

    async def NodeWatchResources(
        self, request: v1.NodeWatchResourcesRequest, context: Context
    ) -> AsyncIterator[v1.NodeWatchResourcesResponse]:
        async for message in self._stream.stream():
            yield message


class HealthV1alpha1(v1alpha1_grpc.DRAResourceHealthServicer):
    def __init__(self, feed: HealthFeed, pool: Callable[[], str], resend: float = RESEND_INTERVAL_S) -> None:
        self._stream = _HealthStream(feed, pool, v1alpha1, resend)

    async def NodeWatchResources(
        self, request: v1alpha1.NodeWatchResourcesRequest, context: Context
    ) -> AsyncIterator[v1alpha1.NodeWatchResourcesResponse]:
        async for message in self._stream.stream():
            yield message
