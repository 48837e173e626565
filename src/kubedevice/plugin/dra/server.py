"""`DRAServer`: a DevicePlugin's DRA face, kept registered with the kubelet's plugin watcher.

The walk:
1. wait for the face's first device list; read the state file (refuse to start if unreadable);
2. serve DRAPlugin v1 and v1beta1 (and DRAResourceHealth v1 and v1alpha1) on the DRA socket;
3. serve the registration socket in ``plugins_registry/``; the kubelet finds it, asks GetInfo and
   reports its verdict with NotifyRegistrationStatus; each success publishes the devices again;
4. watch ``plugins_registry/``: a registration socket that is gone (the folder re-created, a kubelet
   that cleaned it) is served again, which makes the kubelet register the driver again;
5. every device change is published and streamed to the health watchers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

import grpc

from kubedevice.api.constants import (
    DRA_HEALTH_V1_SERVICE,
    DRA_HEALTH_V1ALPHA1_SERVICE,
    DRA_V1_SERVICE,
    DRA_V1BETA1_SERVICE,
)
from kubedevice.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubedevice.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubedevice.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from kubedevice.api.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.grpc_unix import UnixBindError, serve_unix
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi.files import DEFAULT_SPEC_DIR
from kubedevice.plugin.cdi.owner import SpecFile
from kubedevice.plugin.dra.backend.slices import device_name as slice_device_name
from kubedevice.plugin.dra.backend_api import AllocationSource, DRABackend, PublishedTaints
from kubedevice.plugin.dra.health import RESEND_INTERVAL_S, HealthFeed, HealthV1, HealthV1alpha1
from kubedevice.plugin.dra.hooks import DriverHooks
from kubedevice.plugin.dra.paths import DRAPaths, check_driver_name
from kubedevice.plugin.dra.prepare import ClaimPreparer
from kubedevice.plugin.dra.publication import publication
from kubedevice.plugin.dra.services import DRAPluginV1, DRAPluginV1beta1, DRARegistrationService
from kubedevice.plugin.dra.state import CallLock, StateFileError, load_state, read_boot_id
from kubedevice.plugin.dra.taints import TaintBook
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.events import EventBus, EventKind
from kubedevice.plugin.inventory import Inventory
from kubedevice.plugin.watcher import KubeletWatcher, wait_for_directory
from kubedevice.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class DRAServer:
    """Serves one plugin's DRA face from `inventory` (its DRA devices), through `backend`.

    Its CDI spec files (one per prepared claim, and the plugin's own `cdi_spec()`) go into `cdi_spec_dir`,
    else the plugin's `cdi_spec_dir`, else /var/run/cdi; `FacesServer` picks the folder from the kubelet
    folder when neither is set.
    """

    def __init__(
        self,
        plugin: DevicePlugin,
        inventory: Inventory,
        backend: DRABackend,
        paths: DRAPaths,
        events: EventBus,
        *,
        cdi_spec_dir: str | Path | None = None,
        serve_v1: bool = True,
        serve_v1beta1: bool = True,
        boot_id_file: Path | None = None,
        use_inotify: bool = True,
        poll_interval: float = 0.5,
        health_resend_interval: float = RESEND_INTERVAL_S,
    ) -> None:
        self.plugin = plugin
        self.driver = check_driver_name(plugin.driver_name)
        self.paths = paths
        paths.check()
        self.versions = [
            *([DRA_V1_SERVICE] if serve_v1 else []),
            *([DRA_V1BETA1_SERVICE] if serve_v1beta1 else []),
        ]
        if not self.versions:
            raise ConfigError("no supported DRA gRPC API is implemented and enabled")
        if plugin.dra_health:
            self.versions += [DRA_HEALTH_V1_SERVICE, DRA_HEALTH_V1ALPHA1_SERVICE]
        self._serve_v1, self._serve_v1beta1 = serve_v1, serve_v1beta1
        self.inventory = inventory
        self.backend = backend
        self.events = events
        self.health = HealthFeed()
        self.taints = TaintBook(plugin.health_taint)
        self._health_resend = health_resend_interval
        self._poll_interval = poll_interval
        self._names: dict[str, str] = {}
        boot_file = boot_id_file
        spec_dir = Path(cdi_spec_dir or plugin.cdi_spec_dir or DEFAULT_SPEC_DIR).absolute()
        self.preparer = ClaimPreparer(
            plugin=plugin,
            driver=self.driver,
            backend=backend,
            state_file=paths.state_file,
            cdi_spec_dir=spec_dir,
            devices=lambda: {d.id: d for d in self.inventory.devices},
            names=lambda: self._names,
            # One pool, named after the node (as the kubelet plugin helper publishes a node's devices).
            pools=lambda: frozenset({backend.node_name} - {""}),
            boot_id=(lambda: read_boot_id(boot_file)) if boot_file is not None else read_boot_id,
            lock=CallLock(paths.lock_file if paths.rolling_update_uid else None),
            events=events,
            custom_prepare=_overrides(plugin, "prepare"),
        )
        self.registration = DRARegistrationService(
            self.driver, str(paths.dra_socket), self.versions, events, self._registered
        )
        self.watcher = KubeletWatcher(
            str(paths.registry_dir),
            lambda: str(paths.registration_socket),
            use_inotify=use_inotify,
            poll_interval=poll_interval,
        )
        self.registrations = 0
        self._dra_server: grpc.aio.Server | None = None
        self._reg_server: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: Runs until stopped; ends early only with the error that makes serving impossible.
        self.lifecycle: asyncio.Task[None] | None = None
        self._publish_lock = asyncio.Lock()
        self._publish_wanted = asyncio.Event()
        self._backend_started = False
        # The plugin's own CDI spec (`cdi_spec()`), built from this face's devices, as on the other face.
        self.cdi = SpecFile(plugin.cdi_spec, spec_dir, events)
        # What the plugin's own code calls at run time (set_device_taints, set_device_status...).
        self.hooks = DriverHooks(
            self.driver, backend, self.taints, self._publish_wanted.set, lambda: self._names
        )
        plugin.attach_dra_hooks(self.hooks)

    async def start(self) -> None:
        """Check the state file and connect the backend; serving and registration go on in the background."""
        await asyncio.to_thread(load_state, self.paths.state_file)  # unreadable: refuse to start
        await self.backend.start()
        self._backend_started = True
        if isinstance(self.backend, PublishedTaints):
            self.taints.remember(await self.backend.published_taint_times())
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.cdi.run(), name="dra-cdi-spec"))
        self._tasks.append(loop.create_task(self._follow_devices(), name="dra-devices"))
        self._tasks.append(loop.create_task(self._publisher(), name="dra-publish"))
        self.lifecycle = loop.create_task(self._registration_lifecycle(), name="dra-registration")
        self._tasks.append(self.lifecycle)

    async def stop(self) -> None:
        self.plugin.attach_dra_hooks(None)
        await cancel_and_wait(*self._tasks)
        self._tasks.clear()
        self.health.close()
        await self.watcher.stop()
        for server, path in (
            (self._reg_server, self.paths.registration_socket),
            (self._dra_server, self.paths.dra_socket),
        ):
            if server is not None:
                await server.stop(grace=1.0)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        self._reg_server = self._dra_server = None
        await self.cdi.close()
        if self._backend_started:
            self._backend_started = False
            await self.backend.stop()

    async def held(self, ids: frozenset[str]) -> frozenset[str]:
        """Which of these devices a prepared claim or an allocation holds; all when that is unknown."""
        try:
            state = await asyncio.to_thread(load_state, self.paths.state_file)
        except StateFileError as exc:
            log.warning("cannot tell which devices claims hold: %s", exc)
            return ids
        names = {str(d["device_name"]) for entry in state.claims.values() for d in entry.devices}
        if not isinstance(self.backend, AllocationSource):
            return ids
        try:
            names |= await self.backend.allocated_devices()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("cannot tell which devices claims hold: %s", exc)
            return ids
        return frozenset(i for i in ids if slice_device_name(i) in names)

    # ---- devices, publication, health ----------------------------------------------------------

    async def _follow_devices(self) -> None:
        await self.inventory.ready.wait()
        version, devices = self.inventory.version, self.inventory.devices
        while True:
            # Names of devices that went away stay known: a claim may still hold them.
            self._names.update({slice_device_name(d.id): d.id for d in devices})
            self.cdi.devices_changed(devices)
            self.health.update(devices)
            self._publish_wanted.set()
            version, devices = await self.inventory.wait_newer(version)

    async def _publisher(self) -> None:
        while True:
            await self._publish_wanted.wait()
            self._publish_wanted.clear()
            await self._publish()

    def _registered(self) -> None:
        self.registrations += 1
        kind = EventKind.REGISTERED if self.registrations == 1 else EventKind.REREGISTERED
        self.events.emit(kind, endpoint=str(self.paths.dra_socket), count=str(self.registrations))
        self._publish_wanted.set()

    async def _publish(self) -> None:
        async with self._publish_lock:
            try:
                # In the lock: the taints' times are stamped in the order the publications go out.
                wanted = publication(self.plugin, self.taints, self.inventory.devices)
                await self.backend.publish(wanted.devices, wanted.counter_sets)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # The backend retries on its own; the next change or registration publishes again.
                log.error("publishing the devices of %s failed: %s", self.driver, exc)
                return
        self.events.emit(EventKind.PUBLISHED, devices=str(len(wanted.devices)))

    # ---- sockets and registration --------------------------------------------------------------

    async def _registration_lifecycle(self) -> None:
        await self.health.ready.wait()  # names and health of the first list are known
        await self.cdi.settled()  # the spec defines the devices before the kubelet can ask for them
        await self._serve_dra()
        while True:
            if not self.paths.registry_dir.is_dir():
                self.events.emit(EventKind.WAITING, path=str(self.paths.registry_dir))
                await wait_for_directory(str(self.paths.registry_dir), self._poll_interval)
            self.watcher.changed.clear()
            await self._serve_registration()
            if self.watcher.mode == "stopped":
                self.watcher.start()
            while self.watcher.state().own_socket_present:
                await self.watcher.changed.wait()
                self.watcher.changed.clear()
            log.info("registration socket %s is gone: serving it again", self.paths.registration_socket)

    async def _serve_dra(self) -> None:
        def add_services(server: grpc.aio.Server) -> None:
            if self._serve_v1:
                v1_grpc.add_DRAPluginServicer_to_server(DRAPluginV1(self.preparer), server)
            if self._serve_v1beta1:
                v1beta1_grpc.add_DRAPluginServicer_to_server(DRAPluginV1beta1(self.preparer), server)
            if self.plugin.dra_health:
                pool = lambda: self.backend.node_name  # noqa: E731
                health_v1_grpc.add_DRAResourceHealthServicer_to_server(
                    HealthV1(self.health, pool, self._health_resend), server
                )
                health_v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(
                    HealthV1alpha1(self.health, pool, self._health_resend), server
                )

        self._dra_server = await _listen(self.paths.dra_socket, add_services)
        self.events.emit(EventKind.SERVING, endpoint=str(self.paths.dra_socket))

    async def _serve_registration(self) -> None:
        if self._reg_server is not None:
            await self._reg_server.stop(grace=None)
        self._reg_server = await _listen(
            self.paths.registration_socket,
            lambda server: reg_grpc.add_RegistrationServicer_to_server(self.registration, server),
        )
        self.events.emit(EventKind.SERVING, endpoint=str(self.paths.registration_socket))


async def _listen(path: Path, add_services: Callable[[grpc.aio.Server], None]) -> grpc.aio.Server:
    """Serve at `path` (in a folder made if missing), replacing what is there (a socket left by a crash)."""
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    try:
        return await serve_unix(path, add_services)
    except UnixBindError as err:
        raise ConfigError(str(err)) from None


def _overrides(plugin: DevicePlugin, hook: str) -> bool:
    return getattr(type(plugin), hook) is not getattr(DevicePlugin, hook)
