"""A raw DRA kubelet plugin for tests, in plain grpc.aio (not the SDK): what a driver puts on the wire.

    plugin = DRATestPlugin(registry_dir, socket_dir, driver="gpu.example.com")
    plugin.set_devices("u1", Device("node-1", "gpu-0", cdi_device_ids=("gpu.example.com/gpu=gpu-0",)))
    await plugin.start()                      # serves its endpoint, then its registration socket
    status = await plugin.wait_for_status()   # the watcher's NotifyRegistrationStatus
    ...
    await plugin.stop()

Registration: a socket `<registry_dir>/<registration_name>` serving pluginregistration.Registration, whose
GetInfo answers `plugin_type`, `driver`, `info_endpoint` (default: the endpoint socket; "" makes the
registration socket serve DRAPlugin itself) and `supported_versions` (default: the served services, v1
first, then the health service). Each NotifyRegistrationStatus is kept in `statuses`.

DRAPlugin: served on `endpoint` (`<socket_dir>/<driver>.sock` unless given) as v1 and/or v1beta1 (`serve`).
Each call is logged in `calls` (method, service, claims in order) before it is answered. Per claim UID:
`set_devices` (else `set_default_devices`' function, else no devices), `set_error`, `omit` (left out of the
answer); `answer_unknown` adds a UID nobody asked for; `hang` makes calls (of some UIDs) wait until `release`;
`fail` fails whole calls of a method with a gRPC status.

Health: with `health_service` ("v1.DRAResourceHealth" or "v1alpha1.DRAResourceHealth"), NodeWatchResources is
served; `push_health` sends one complete list to every open stream, `end_health_streams` ends them.

`stop_endpoint` / `start_endpoint` / `restart_endpoint` stop and serve the endpoint socket again at the same
path without touching the registration socket (a restart the kubelet sees only as a connection change).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from kubedevice.api.constants import (
    DRA_HEALTH_V1_SERVICE,
    DRA_PLUGIN_TYPE,
    DRA_V1_SERVICE,
    DRA_V1BETA1_SERVICE,
)
from kubedevice.api.dra.v1 import api_pb2 as v1
from kubedevice.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubedevice.api.dra.v1beta1 import api_pb2 as v1beta1
from kubedevice.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubedevice.api.drahealth.v1 import api_pb2 as health_v1
from kubedevice.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from kubedevice.api.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from kubedevice.api.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.dra.types import DriverClaim

PREPARE = "NodePrepareResources"
UNPREPARE = "NodeUnprepareResources"
HEALTH_NAMES = {"Unknown": 0, "Healthy": 1, "Unhealthy": 2}


@dataclass(frozen=True)
class Device:
    """A device the plugin answers for a claim."""

    pool_name: str
    device_name: str
    request_names: tuple[str, ...] = ()
    cdi_device_ids: tuple[str, ...] = ()
    #: Sent only through v1 (explicit presence); None leaves the field unset.
    share_id: str | None = None


@dataclass(frozen=True)
class Call:
    """One DRAPlugin call as received: method ("NodePrepareResources"...), service ("v1.DRAPlugin"...)."""

    method: str
    service: str
    claims: tuple[DriverClaim, ...]


@dataclass(frozen=True)
class HealthReport:
    """One device of a NodeWatchResources message; health "Healthy", "Unhealthy" or "Unknown"."""

    pool_name: str
    device_name: str
    health: str
    message: str = ""
    timeout_seconds: int = 0


@dataclass
class _Behaviour:
    devices: dict[str, list[Device]] = field(default_factory=dict)
    prepare_errors: dict[str, str] = field(default_factory=dict)
    unprepare_errors: dict[str, str] = field(default_factory=dict)
    omitted: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)
    failure: dict[str, tuple[grpc.StatusCode, str]] = field(default_factory=dict)
    #: method -> the UIDs whose calls hang (None: every call of the method).
    hung: dict[str, set[str] | None] = field(default_factory=dict)
    default_devices: Callable[[DriverClaim], Sequence[Device]] | None = None


class _DRAService:
    """DRAPlugin of one API version, answering from the plugin's behaviour."""

    def __init__(self, plugin: DRATestPlugin, pb: Any, service: str) -> None:
        self._plugin = plugin
        self._pb = pb
        self._service = service

    async def _enter(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> None:
        plugin = self._plugin
        claims = tuple(DriverClaim(c.namespace, c.uid, c.name) for c in request.claims)
        plugin.calls.append(Call(method, self._service, claims))
        plugin._call_seen.set()
        b = plugin.behaviour
        if method in b.hung:
            uids = b.hung[method]
            if uids is None or any(c.uid in uids for c in claims):
                await plugin._release.wait()
        if method in b.failure:
            code, details = b.failure[method]
            await context.abort(code, details)

    async def NodePrepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._enter(PREPARE, request, context)
        b, pb = self._plugin.behaviour, self._pb
        out = pb.NodePrepareResourcesResponse()
        for uid in [c.uid for c in request.claims if c.uid not in b.omitted] + b.unknown:
            entry = out.claims[uid]
            if uid in b.prepare_errors:
                entry.error = b.prepare_errors[uid]
                continue
            claim = next((c for c in request.claims if c.uid == uid), None)
            devices = b.devices.get(uid)
            if devices is None and b.default_devices is not None and claim is not None:
                devices = list(b.default_devices(DriverClaim(claim.namespace, claim.uid, claim.name)))
            for d in devices or []:
                device = entry.devices.add(
                    request_names=d.request_names,
                    pool_name=d.pool_name,
                    device_name=d.device_name,
                    cdi_device_ids=d.cdi_device_ids,
                )
                if d.share_id is not None and pb is v1:
                    device.share_id = d.share_id
        return out

    async def NodeUnprepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._enter(UNPREPARE, request, context)
        b, pb = self._plugin.behaviour, self._pb
        out = pb.NodeUnprepareResourcesResponse()
        for uid in [c.uid for c in request.claims if c.uid not in b.omitted] + b.unknown:
            out.claims[uid].error = b.unprepare_errors.get(uid, "")
        return out


class _HealthService:
    def __init__(self, plugin: DRATestPlugin, pb: Any) -> None:
        self._plugin = plugin
        self._pb = pb

    async def NodeWatchResources(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._plugin._health_streams.append(queue)
        try:
            while True:
                message = await queue.get()
                if message is None:
                    return
                yield message
        finally:
            with contextlib.suppress(ValueError):
                self._plugin._health_streams.remove(queue)


class _Registration:
    def __init__(self, plugin: DRATestPlugin) -> None:
        self._plugin = plugin

    async def GetInfo(self, request: reg.InfoRequest, context: grpc.aio.ServicerContext) -> reg.PluginInfo:
        p = self._plugin
        return reg.PluginInfo(
            type=p.plugin_type,
            name=p.driver,
            endpoint=p.info_endpoint,
            supported_versions=p.supported_versions,
        )

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: grpc.aio.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        self._plugin.statuses.append(request)
        self._plugin._status_seen.set()
        return reg.RegistrationStatusResponse()


class DRATestPlugin:
    """A DRA driver's kubelet plugin at the wire level; see the module's docstring."""

    def __init__(
        self,
        registry_dir: Path | str,
        socket_dir: Path | str,
        *,
        driver: str = "gpu.example.com",
        serve: Sequence[str] = (DRA_V1_SERVICE, DRA_V1BETA1_SERVICE),
        health_service: str | None = None,
        supported_versions: Sequence[str] | None = None,
        plugin_type: str = DRA_PLUGIN_TYPE,
        endpoint: str | None = None,
        info_endpoint: str | None = None,
        registration_name: str | None = None,
    ) -> None:
        self.driver = driver
        self.serve = tuple(serve)
        self.health_service = health_service
        self.plugin_type = plugin_type
        self.registration_socket = os.path.join(str(registry_dir), registration_name or f"{driver}-reg.sock")
        self.endpoint = endpoint or os.path.join(str(socket_dir), f"{driver}.sock")
        #: What GetInfo names as the endpoint; "" means the registration socket serves DRAPlugin too.
        self.info_endpoint = self.endpoint if info_endpoint is None else info_endpoint
        default_versions = [*self.serve, *([health_service] if health_service else [])]
        self.supported_versions = list(default_versions if supported_versions is None else supported_versions)
        self.behaviour = _Behaviour()
        self.calls: list[Call] = []
        self.statuses: list[reg.RegistrationStatus] = []
        self._call_seen = asyncio.Event()
        self._status_seen = asyncio.Event()
        self._release = asyncio.Event()
        self._health_streams: list[asyncio.Queue[Any]] = []
        self._registration: grpc.aio.Server | None = None
        self._endpoint_server: grpc.aio.Server | None = None

    # --- behaviour ---

    def set_devices(self, uid: str, *devices: Device) -> None:
        self.behaviour.devices[uid] = list(devices)

    def set_error(self, uid: str, error: str, *, method: str = PREPARE) -> None:
        """A per-claim error in the answer to `method` (PREPARE or UNPREPARE); "" clears it."""
        errors = self.behaviour.prepare_errors if method == PREPARE else self.behaviour.unprepare_errors
        errors[uid] = error
        if not error:
            del errors[uid]

    def omit(self, uid: str) -> None:
        """Leave this claim out of every answer."""
        self.behaviour.omitted.add(uid)

    def answer_unknown(self, uid: str) -> None:
        """Add an entry for `uid` to every answer, asked for or not."""
        self.behaviour.unknown.append(uid)

    def fail(self, method: str, code: grpc.StatusCode, details: str) -> None:
        """Fail every call of `method` as a whole with this status."""
        self.behaviour.failure[method] = (code, details)

    def set_default_devices(self, devices_for: Callable[[DriverClaim], Sequence[Device]] | None) -> None:
        """The devices of a claim without `set_devices` (default: none)."""
        self.behaviour.default_devices = devices_for

    def hang(self, method: str, *uids: str) -> None:
        """Calls of `method` (those naming one of `uids`, if given) wait until `release()` or the caller's
        deadline."""
        self._release.clear()
        self.behaviour.hung[method] = set(uids) if uids else None

    def release(self) -> None:
        self.behaviour.hung.clear()
        self._release.set()

    # --- observation ---

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for_status(self, count: int = 1, deadline: float = 20.0) -> reg.RegistrationStatus:
        """The `count`-th NotifyRegistrationStatus received (1-based), once it has come."""
        async with asyncio.timeout(deadline):
            while len(self.statuses) < count:
                self._status_seen.clear()
                await self._status_seen.wait()
        return self.statuses[count - 1]

    async def wait_for_calls(self, count: int, deadline: float = 20.0) -> list[Call]:
        async with asyncio.timeout(deadline):
            while len(self.calls) < count:
                self._call_seen.clear()
                await self._call_seen.wait()
        return self.calls

    @property
    def health_streams(self) -> int:
        """How many NodeWatchResources streams are open now."""
        return len(self._health_streams)

    async def push_health(self, *devices: HealthReport) -> None:
        """Send this complete device list to every open health stream."""
        for queue in list(self._health_streams):
            await queue.put(self._health_message(devices))

    async def end_health_streams(self) -> None:
        """End every open health stream (the plugin's side of a stream end)."""
        for queue in list(self._health_streams):
            await queue.put(None)

    def _health_message(self, devices: Sequence[HealthReport]) -> Any:
        pb = health_v1 if self.health_service == DRA_HEALTH_V1_SERVICE else health_v1alpha1
        return pb.NodeWatchResourcesResponse(
            devices=[
                pb.DeviceHealth(
                    device=pb.DeviceIdentifier(pool_name=d.pool_name, device_name=d.device_name),
                    health=HEALTH_NAMES[d.health],
                    health_check_timeout_seconds=d.timeout_seconds,
                    message=d.message,
                )
                for d in devices
            ]
        )

    # --- serving ---

    def _add_plugin_services(self, server: grpc.aio.Server) -> None:
        if DRA_V1_SERVICE in self.serve:
            v1_grpc.add_DRAPluginServicer_to_server(_DRAService(self, v1, DRA_V1_SERVICE), server)
        if DRA_V1BETA1_SERVICE in self.serve:
            v1beta1_grpc.add_DRAPluginServicer_to_server(
                _DRAService(self, v1beta1, DRA_V1BETA1_SERVICE), server
            )
        if self.health_service == DRA_HEALTH_V1_SERVICE:
            health_v1_grpc.add_DRAResourceHealthServicer_to_server(_HealthService(self, health_v1), server)
        elif self.health_service is not None:
            health_v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(
                _HealthService(self, health_v1alpha1), server
            )

    async def start_endpoint(self) -> None:
        if self.info_endpoint == "":
            return  # the registration socket serves it
        server = grpc.aio.server()
        self._add_plugin_services(server)
        server.add_insecure_port("unix://" + self.endpoint)
        await server.start()
        self._endpoint_server = server

    async def stop_endpoint(self) -> None:
        """Stop serving the endpoint socket and remove it; open health streams end."""
        await self.end_health_streams()
        self._release.set()
        if self._endpoint_server is not None:
            await self._endpoint_server.stop(None)
            self._endpoint_server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.endpoint)

    async def restart_endpoint(self) -> None:
        await self.stop_endpoint()
        await self.start_endpoint()

    async def start(self) -> None:
        """Serve the endpoint first, then the registration socket (a driver registers once it serves)."""
        await self.start_endpoint()
        await self.start_registration()

    async def start_registration(self) -> None:
        """Serve the registration socket (again): the watcher sees a new socket."""
        server = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        if self.info_endpoint == "":
            self._add_plugin_services(server)
        server.add_insecure_port("unix://" + self.registration_socket)
        await server.start()
        self._registration = server

    async def stop_registration(self) -> None:
        """Remove the registration socket (the watcher deregisters); the endpoint keeps serving."""
        if self._registration is not None:
            await self._registration.stop(None)
            self._registration = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.registration_socket)

    async def stop(self) -> None:
        await self.stop_registration()
        await self.stop_endpoint()

    async def __aenter__(self) -> DRATestPlugin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
