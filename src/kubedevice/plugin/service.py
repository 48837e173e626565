"""The gRPC services a plugin serves: v1beta1.DevicePlugin, plus pluginregistration.Registration
in plugin-watcher mode.

Requests from the kubelet are checked here, before the author's hooks see them: unknown or unhealthy
device IDs are refused with INVALID_ARGUMENT naming them, and an exception from a hook becomes
INTERNAL with its message instead of taking the server down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc

from kubedevice.api.constants import DEVICE_PLUGIN_TYPE, SUPPORTED_VERSIONS
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.errors import InvalidRequest
from kubedevice.plugin.events import EventBus, EventKind
from kubedevice.plugin.inventory import Inventory
from kubedevice.plugin.metrics import PluginMetrics
from kubedevice.plugin.model import Device
from kubedevice.plugin.wire import allocation_to_wire, devices_to_wire, options_to_wire

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
T = TypeVar("T")


class _Refused(Exception):
    """A request refused with a gRPC status; raised inside handlers, turned into abort() at the edge."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DevicePluginService(dp_grpc.DevicePluginServicer):
    def __init__(
        self, plugin: DevicePlugin, inventory: Inventory, events: EventBus, metrics: PluginMetrics
    ) -> None:
        self._plugin = plugin
        self._inventory = inventory
        self._events = events
        self._metrics = metrics
        self._resource = plugin.resource_name
        self._closing = asyncio.Event()

    def close(self) -> None:
        """End every ListAndWatch stream of this service, so the gRPC server can stop without a grace wait."""
        self._closing.set()

    async def GetDevicePluginOptions(self, request: dp.Empty, context: Context) -> dp.DevicePluginOptions:
        return options_to_wire(self._plugin.options())

    async def ListAndWatch(
        self, request: dp.Empty, context: Context
    ) -> AsyncIterator[dp.ListAndWatchResponse]:
        # Every message is the full list (the kubelet replaces its state with each one).
        await self._inventory.ready.wait()
        version, devices = self._inventory.version, self._inventory.devices
        closing = asyncio.ensure_future(self._closing.wait())
        newer: asyncio.Future[tuple[int, tuple[Device, ...]]] | None = None
        try:
            while not self._closing.is_set():
                yield devices_to_wire(devices)
                newer = asyncio.ensure_future(self._inventory.wait_newer(version))
                await asyncio.wait({newer, closing}, return_when=asyncio.FIRST_COMPLETED)
                if not newer.done():
                    return
                version, devices = newer.result()
        finally:
            # The kubelet hanging up cancels us mid-wait: leave no orphan waiter behind.
            closing.cancel()
            if newer is not None:
                newer.cancel()

    async def Allocate(self, request: dp.AllocateRequest, context: Context) -> dp.AllocateResponse:
        response = dp.AllocateResponse()
        for number, container in enumerate(request.container_requests):
            ids = list(container.devices_ids)
            try:
                devices = self._known(ids, "Allocate")
                unhealthy = sorted(d.id for d in devices if not d.healthy)
                if unhealthy:
                    raise _Refused(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"Allocate: unhealthy {self._resource} devices: {', '.join(unhealthy)}",
                    )
                if not devices:
                    raise _Refused(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"Allocate: container request {number} names no {self._resource} devices",
                    )
                allocation = await self._hook("allocate", self._plugin.allocate(devices))
                response.container_responses.append(allocation_to_wire(allocation))
            except _Refused as refused:
                result = "invalid" if refused.code == grpc.StatusCode.INVALID_ARGUMENT else "error"
                self._metrics.count_allocation(result)
                self._events.emit(EventKind.ALLOCATE, devices=",".join(ids), result=result)
                await context.abort(refused.code, refused.message)
            self._metrics.count_allocation("ok")
            self._events.emit(EventKind.ALLOCATE, devices=",".join(ids), result="ok")
        return response

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: Context
    ) -> dp.PreferredAllocationResponse:
        response = dp.PreferredAllocationResponse()
        try:
            if not self._plugin.options().get_preferred_allocation_available:
                raise _Refused(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"plugin for {self._resource} does not offer GetPreferredAllocation",
                )
            for container in request.container_requests:
                available = self._known(list(container.available_deviceIDs), "GetPreferredAllocation")
                must_include = self._known(list(container.must_include_deviceIDs), "GetPreferredAllocation")
                size = container.allocation_size
                available_ids = {d.id for d in available}
                outside = sorted(d.id for d in must_include if d.id not in available_ids)
                if outside:
                    raise _Refused(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        "GetPreferredAllocation: must-include devices not among available: "
                        + ", ".join(outside),
                    )
                if size < len(must_include) or size > len(available):
                    raise _Refused(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"GetPreferredAllocation: allocation_size {size} is outside "
                        f"[{len(must_include)}, {len(available)}]",
                    )
                chosen = list(
                    await self._hook(
                        "preferred_allocation",
                        self._plugin.preferred_allocation(available, must_include, size),
                    )
                )
                strays = sorted(set(chosen) - available_ids)
                if strays:
                    raise _Refused(
                        grpc.StatusCode.INTERNAL,
                        f"preferred_allocation returned devices that are not available: {', '.join(strays)}",
                    )
                response.container_responses.append(dp.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        except _Refused as refused:
            await context.abort(refused.code, refused.message)
        return response

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: Context
    ) -> dp.PreStartContainerResponse:
        ids = list(request.devices_ids)
        try:
            if not self._plugin.options().pre_start_required:
                raise _Refused(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"plugin for {self._resource} does not require PreStartContainer",
                )
            # Devices that turned unhealthy since Allocate still get their pre-start: the container owns them.
            devices = self._known(ids, "PreStartContainer")
            await self._hook("pre_start_container", self._plugin.pre_start_container(devices))
        except _Refused as refused:
            self._events.emit(EventKind.PRE_START, devices=",".join(ids), result="refused")
            await context.abort(refused.code, refused.message)
        self._events.emit(EventKind.PRE_START, devices=",".join(ids), result="ok")
        return dp.PreStartContainerResponse()

    def _known(self, ids: Sequence[str], rpc: str) -> list[Device]:
        found = [self._inventory.get(i) for i in ids]
        unknown = sorted({i for i, d in zip(ids, found, strict=True) if d is None})
        if unknown:
            raise _Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{rpc}: unknown {self._resource} devices: {', '.join(unknown)}",
            )
        return [d for d in found if d is not None]

    async def _hook(self, name: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except asyncio.CancelledError:
            raise
        except InvalidRequest as exc:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{name}: {exc}") from exc
        except NotImplementedError as exc:
            raise _Refused(grpc.StatusCode.UNIMPLEMENTED, f"{name} is not implemented by the plugin") from exc
        except Exception as exc:
            log.exception("%s hook of %s failed", name, self._resource)
            raise _Refused(grpc.StatusCode.INTERNAL, f"{name} failed: {type(exc).__name__}: {exc}") from exc


class WatcherRegistrationService(reg_grpc.RegistrationServicer):
    """pluginregistration.Registration for kubelets that discover plugins in plugins_registry/."""

    def __init__(self, resource: str, endpoint: Callable[[], str], events: EventBus) -> None:
        self._resource = resource
        self._endpoint = endpoint
        self._events = events
        self.statuses: list[reg.RegistrationStatus] = []

    async def GetInfo(self, request: reg.InfoRequest, context: Context) -> reg.PluginInfo:
        return reg.PluginInfo(
            type=DEVICE_PLUGIN_TYPE,
            name=self._resource,
            endpoint=self._endpoint(),
            supported_versions=list(SUPPORTED_VERSIONS),
        )

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: Context
    ) -> reg.RegistrationStatusResponse:
        self.statuses.append(request)
        if request.plugin_registered:
            log.log(self._events.said_level, "plugin watcher registered %s", self._resource)
        else:
            log.error("plugin watcher refused %s: %s", self._resource, request.error)
        self._events.emit(
            EventKind.WATCHER_STATUS,
            registered=str(request.plugin_registered).lower(),
            error=request.error or "-",
        )
        return reg.RegistrationStatusResponse()
