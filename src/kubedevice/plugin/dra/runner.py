"""`FacesServer`: one plugin served on the face(s) `api` names, from one device source.

``api="device-plugin"`` is the classic `PluginServer`; ``"dra"`` a `DRAServer`; ``"both"`` the two
side by side over disjoint devices (see `faces`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

from kubedevice.inventory.reader import PodResourcesError, PodResourcesReader
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.dra.backend import DRABackendError, cluster_mode, make_backend
from kubedevice.plugin.dra.backend_api import DRABackend
from kubedevice.plugin.dra.faces import APIS, MOVE_RETRY_S, Api, FacePlugin, FaceSplit
from kubedevice.plugin.dra.paths import (
    DRAPaths,
    cdi_spec_dir,
    check_driver_name,
    resolve_kubelet_dir,
    say_cdi_spec_dir,
)
from kubedevice.plugin.dra.server import DRAServer
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.events import EventBus, EventHandler, EventKind
from kubedevice.plugin.model import Face
from kubedevice.plugin.naming import check_resource_name
from kubedevice.plugin.server import PluginServer
from kubedevice.tasks import cancel_and_wait

log = logging.getLogger(__name__)


def default_api(plugin: DevicePlugin) -> Api:
    """The device plugin face when a resource name is set, else DRA."""
    return "device-plugin" if plugin.resource_name or not plugin.driver_name else "dra"


def check_names(plugin: DevicePlugin, api: str) -> Api:
    """The start errors that depend on the plugin's names, in the order a user fixes them."""
    if api not in APIS:
        raise ConfigError(f'api must be "device-plugin", "dra" or "both", got {api!r}')
    if not plugin.resource_name and not plugin.driver_name:
        raise ConfigError(
            "the plugin sets neither resource_name nor driver_name — set resource_name for the device "
            "plugin API, driver_name for DRA"
        )
    chosen: Api = api  # type: ignore[assignment, unused-ignore]
    if chosen in ("device-plugin", "both"):
        if not plugin.resource_name:
            raise ConfigError(f'api="{chosen}" needs resource_name — set it, or serve with api="dra"')
        check_resource_name(plugin.resource_name)
    if chosen in ("dra", "both"):
        if not plugin.driver_name:
            raise ConfigError(f'api="{chosen}" needs driver_name — set it, or serve with api="device-plugin"')
        check_driver_name(plugin.driver_name)
    return chosen


class FacesServer:
    """Runs the faces until `stop()` or, with `handle_signals`, SIGTERM/SIGINT.

    Every CDI spec file of the plugin goes into one folder (`paths.cdi_spec_dir()`): the plugin's
    `cdi_spec_dir`, else DRAServer's option of that name, else the default of the kubelet folder (the
    runtime's /var/run/cdi beside a real kubelet, `<kubelet_dir>/cdi` beside `kubedevice node`).
    """

    def __init__(
        self,
        plugin: DevicePlugin,
        api: str,
        *,
        kubelet_dir: str | Path | None = None,
        backend: DRABackend | None = None,
        kubeconfig: str | None = None,
        node_name: str | None = None,
        rolling_update_uid: str = "",
        registration_socket_file: str = "",
        dra_options: dict[str, Any] | None = None,
        handle_signals: bool = False,
        on_event: EventHandler | None = None,
        log_events: bool = True,
        face_move_retry_s: float = MOVE_RETRY_S,
        **plugin_server_options: Any,
    ) -> None:
        self.api = check_names(plugin, api)
        self.plugin = plugin
        self.kubelet_dir = resolve_kubelet_dir(kubelet_dir)
        dra_options = dict(dra_options or {})
        setting = plugin.cdi_spec_dir or dra_options.get("cdi_spec_dir")
        #: Where the plugin's CDI spec files go; DRAServer's own option still names the DRA face's.
        self.cdi_spec_dir = cdi_spec_dir(
            setting, self.kubelet_dir, cluster=backend is None and cluster_mode(kubeconfig)
        )
        # Chosen here rather than set: the log says where, once the faces have started.
        self._cdi_spec_dir_chosen = not setting
        dra_options["cdi_spec_dir"] = dra_options.get("cdi_spec_dir") or self.cdi_spec_dir
        self.split = FaceSplit(plugin, self.api, self._held, face_move_retry_s)
        self._handle_signals = handle_signals
        self._stop_requested = asyncio.Event()
        self.device_plugin: PluginServer | None = None
        self.dra: DRAServer | None = None
        if self.api in ("device-plugin", "both"):
            self.device_plugin = PluginServer(
                FacePlugin(plugin, self.split.faces["device-plugin"]),
                on_event=on_event,
                log_events=log_events,
                cdi_spec_dir=self.cdi_spec_dir,
                **plugin_server_options,
            )
        if self.api in ("dra", "both"):
            paths = DRAPaths(
                self.kubelet_dir,
                check_driver_name(plugin.driver_name),
                rolling_update_uid,
                registration_socket_file,
            )
            paths.check()
            if backend is None:
                try:
                    backend = _make_backend(paths, kubeconfig, node_name)
                except DRABackendError as exc:
                    raise ConfigError(str(exc)) from None
            events = EventBus(plugin.driver_name, face="dra", log_events=log_events)
            if on_event is not None:
                events.subscribe(on_event)
            self.dra = DRAServer(plugin, self.split.faces["dra"], backend, paths, events, **dra_options)
        self._split_task: asyncio.Task[None] | None = None
        self._stopped = False

    async def _held(self, face: Face, ids: frozenset[str]) -> frozenset[str]:
        """Which of these devices something holds on `face`: a container PodResources lists with it on
        the device plugin face, a prepared claim or an allocation on DRA. Unknown counts as held."""
        if face == "dra":
            return await self.dra.held(ids) if self.dra is not None else ids
        socket = self.kubelet_dir / "pod-resources" / "kubelet.sock"
        try:
            view = await PodResourcesReader(str(socket)).read()
        except PodResourcesError as exc:
            log.info("cannot tell which devices containers hold (%s): they stay where they are", exc)
            return ids
        return ids & frozenset(view.held_ids().get(self.plugin.resource_name, set()))

    async def start(self) -> None:
        # The DRA face first: an unreadable state file refuses the start before anything is served.
        if self.dra is not None:
            try:
                await self.dra.start()
            except DRABackendError as exc:
                await self.dra.stop()
                raise ConfigError(str(exc)) from None
        self._split_task = asyncio.get_running_loop().create_task(self.split.run(), name="device-source")
        if self.device_plugin is not None:
            await self.device_plugin.start()
        if self._cdi_spec_dir_chosen:
            say_cdi_spec_dir(self.cdi_spec_dir, self.kubelet_dir)
        if self._handle_signals:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, self._stop_requested.set)
            loop.add_signal_handler(signal.SIGINT, self._stop_requested.set)

    async def run(self) -> None:
        """Start, serve until `stop()` or a stop signal, then stop; an error that ends a face is raised."""
        await self.start()
        stop = asyncio.ensure_future(self._stop_requested.wait())
        faces = [s.lifecycle for s in (self.device_plugin, self.dra) if s is not None and s.lifecycle]
        try:
            done, _ = await asyncio.wait({stop, *faces}, return_when=asyncio.FIRST_COMPLETED)
            for task in faces:
                if task in done and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            stop.cancel()
            await self.stop()

    def request_stop(self) -> None:
        self._stop_requested.set()

    async def stop(self) -> None:
        """Stop every face and the device source. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self._handle_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            self._handle_signals = False
        if self.device_plugin is not None:
            await self.device_plugin.stop()
        if self.dra is not None:
            await self.dra.stop()
            self.dra.events.emit(EventKind.STOPPED)
        await cancel_and_wait(self._split_task)
        self._split_task = None

    async def __aenter__(self) -> FacesServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


def _make_backend(paths: DRAPaths, kubeconfig: str | None, node_name: str | None) -> DRABackend:
    return make_backend(
        kubelet_dir=paths.kubelet_dir, driver_name=paths.driver, kubeconfig=kubeconfig, node_name=node_name
    )
