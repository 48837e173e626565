"""Small device plugins for the manager's tests: real grpc.aio servers on real unix sockets.

A FakePlugin streams whatever devices the test sets, answers Allocate with one response per container
request (or whatever the test's handler says), records every call, and registers through kubelet.sock.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.manager import Container, DeviceManager, Pod
from tests.waiting import poll_async

AllocateHandler = Callable[[dp.AllocateRequest], Awaitable[dp.AllocateResponse]]
PreferredHandler = Callable[[dp.PreferredAllocationRequest], Awaitable[dp.PreferredAllocationResponse]]


def make_devices(
    count: int, prefix: str = "dev", health: str = "Healthy", numa: Iterable[int] | None = None
) -> list[dp.Device]:
    nodes = list(numa) if numa is not None else None
    out = []
    for i in range(count):
        d = dp.Device(ID=f"{prefix}{i}", health=health)
        if nodes is not None:
            d.topology.nodes.add(ID=nodes[i % len(nodes)])
        out.append(d)
    return out


def device(did: str, health: str = "Healthy", numa: Iterable[int] = ()) -> dp.Device:
    d = dp.Device(ID=did, health=health)
    for n in numa:
        d.topology.nodes.add(ID=n)
    return d


async def default_allocate(request: dp.AllocateRequest) -> dp.AllocateResponse:
    resp = dp.AllocateResponse()
    for creq in request.container_requests:
        ids = ",".join(creq.devices_ids)
        c = resp.container_responses.add()
        c.envs["FAKE_DEVICES"] = ids
        for did in creq.devices_ids:
            c.devices.add(container_path=f"/dev/{did}", host_path=f"/dev/{did}", permissions="rw")
            c.cdi_devices.add(name=f"example.com/fake={did}")
    return resp


class FakePlugin(dp_grpc.DevicePluginServicer, reg_grpc.RegistrationServicer):
    """A device plugin (and, for probe mode, a pluginregistration server) on `socket_path`."""

    def __init__(
        self,
        socket_path: Path,
        resource: str = "example.com/fake",
        devices: Iterable[dp.Device] = (),
        *,
        options: dp.DevicePluginOptions | None = None,
        allocate: AllocateHandler = default_allocate,
        preferred: PreferredHandler | None = None,
        info: reg.PluginInfo | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.resource = resource
        self.devices = list(devices)
        self.options = options or dp.DevicePluginOptions()
        self.allocate_handler = allocate
        self.preferred_handler = preferred
        self.info = info
        self.allocate_calls: list[list[str]] = []
        self.preferred_calls: list[dp.ContainerPreferredAllocationRequest] = []
        self.prestart_calls: list[list[str]] = []
        self.prestart_error: str | None = None
        self.registration_status: list[reg.RegistrationStatus] = []
        self.streams_opened = 0
        self._queues: list[asyncio.Queue[list[dp.Device] | None]] = []
        self._server: grpc.aio.Server | None = None

    # ---- server
    async def start(self) -> FakePlugin:
        server = grpc.aio.server()
        dp_grpc.add_DevicePluginServicer_to_server(self, server)
        if self.info is not None:
            reg_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port("unix://" + str(self.socket_path))
        await server.start()
        self._server = server
        return self

    async def stop(self) -> None:
        self.end_streams()
        if self._server is not None:
            await self._server.stop(None)
            self._server = None

    async def register(
        self, kubelet_socket: Path, endpoint: str | None = None, version: str = "v1beta1"
    ) -> None:
        async with grpc.aio.insecure_channel("unix://" + str(kubelet_socket)) as channel:
            stub = dp_grpc.RegistrationStub(channel)
            await stub.Register(
                dp.RegisterRequest(
                    version=version,
                    endpoint=endpoint if endpoint is not None else self.socket_path.name,
                    resource_name=self.resource,
                    options=self.options,
                ),
                timeout=30,
            )

    def set_devices(self, devices: Iterable[dp.Device]) -> None:
        """Send a new snapshot on every open stream."""
        self.devices = list(devices)
        for q in self._queues:
            q.put_nowait(self.devices)

    def end_streams(self) -> None:
        for q in self._queues:
            q.put_nowait(None)

    # ---- DevicePlugin
    async def GetDevicePluginOptions(self, request: dp.Empty, context: Any) -> dp.DevicePluginOptions:
        return self.options

    async def ListAndWatch(self, request: dp.Empty, context: Any) -> AsyncIterator[dp.ListAndWatchResponse]:
        queue: asyncio.Queue[list[dp.Device] | None] = asyncio.Queue()
        self._queues.append(queue)
        self.streams_opened += 1
        try:
            yield dp.ListAndWatchResponse(devices=self.devices)
            while (devices := await queue.get()) is not None:
                yield dp.ListAndWatchResponse(devices=devices)
        finally:
            self._queues.remove(queue)

    async def Allocate(self, request: dp.AllocateRequest, context: Any) -> dp.AllocateResponse:
        self.allocate_calls.append([i for c in request.container_requests for i in c.devices_ids])
        return await self.allocate_handler(request)

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: Any
    ) -> dp.PreferredAllocationResponse:
        self.preferred_calls.extend(request.container_requests)
        if self.preferred_handler is not None:
            return await self.preferred_handler(request)
        return dp.PreferredAllocationResponse()

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: Any
    ) -> dp.PreStartContainerResponse:
        self.prestart_calls.append(list(request.devices_ids))
        if self.prestart_error is not None:
            await context.abort(grpc.StatusCode.INTERNAL, self.prestart_error)
        return dp.PreStartContainerResponse()

    # ---- pluginregistration (probe mode)
    async def GetInfo(self, request: reg.InfoRequest, context: Any) -> reg.PluginInfo:
        assert self.info is not None
        return self.info

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: Any
    ) -> reg.RegistrationStatusResponse:
        self.registration_status.append(request)
        return reg.RegistrationStatusResponse()


async def eventually(predicate: Callable[[], bool], within: float = 10.0, what: str = "condition") -> None:
    await poll_async(predicate, what, within, interval=0.005)


@asynccontextmanager
async def running_manager(root: Path, **kwargs: Any) -> AsyncIterator[DeviceManager]:
    manager = DeviceManager(root / "dp", **kwargs)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


@asynccontextmanager
async def serving(*plugins: FakePlugin) -> AsyncIterator[None]:
    for p in plugins:
        await p.start()
    try:
        yield
    finally:
        for p in plugins:
            await p.stop()


def cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


#: The resource the manager tests allocate unless they say otherwise.
RESOURCE = "example.com/fake"


async def registered(m: DeviceManager, plugin: FakePlugin, healthy: int | None = None) -> None:
    """Register `plugin` and wait until the manager counts its healthy devices as allocatable."""
    await plugin.register(m.socket_path)
    expect = sum(d.health == "Healthy" for d in plugin.devices) if healthy is None else healthy
    await eventually(lambda: m.get_capacity()[1].get(plugin.resource) == expect, what=f"{expect} allocatable")


def held(m: DeviceManager, pod: str, container: str = "c", resource: str = RESOURCE) -> set[str]:
    """The device IDs a container holds."""
    devices = m.get_devices(pod, container)
    assert devices is not None
    return set(devices.get(resource, {}))


def one(pod_uid: str, count: int, resource: str = RESOURCE) -> tuple[Pod, Container]:
    """A pod of one container "c" asking for `count` devices."""
    c = Container("c", {resource: count})
    return Pod(pod_uid, containers=[c]), c
