"""`PluginServer` and `serve()`: run a DevicePlugin beside a kubelet for as long as the process lives.

The walk, in the kubelet's order:
1. follow the author's device source until the first list is known;
2. wait for kubelet.sock; serve v1beta1.DevicePlugin on a fresh socket and dial it ourselves
   (the kubelet dials it *inside* Register, so it must already answer);
3. Register, retrying with capped exponential backoff;
4. watch the directory: kubelet.sock re-created, or our socket deleted, means the kubelet restarted;
   serve on a new socket and register again — once per restart, however many signs it gave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path

import grpc

from kubedevice.api.constants import DEVICE_PLUGIN_PATH, DIAL_TIMEOUT_S, PLUGINS_REGISTRY_PATH, VERSION
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.backoff import Backoff
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi.files import DEFAULT_SPEC_DIR
from kubedevice.plugin.cdi.owner import SpecFile
from kubedevice.plugin.endpoints import PluginEndpoints
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.events import EventBus, EventHandler, EventKind
from kubedevice.plugin.inventory import Inventory
from kubedevice.plugin.metrics import PluginMetrics
from kubedevice.plugin.model import Device
from kubedevice.plugin.naming import check_resource_name, check_socket_path, socket_stem
from kubedevice.plugin.service import DevicePluginService, WatcherRegistrationService
from kubedevice.plugin.watcher import KubeletWatcher, SocketIdentity, wait_for_directory
from kubedevice.plugin.wire import options_to_wire
from kubedevice.tasks import cancel_and_wait

log = logging.getLogger(__name__)

#: The kubelet's device plugin directory, without the trailing slash.
DEFAULT_PLUGIN_DIR = DEVICE_PLUGIN_PATH.rstrip("/")
#: The plugin watcher's directory (probe mode), without the trailing slash.
DEFAULT_REGISTRY_DIR = PLUGINS_REGISTRY_PATH.rstrip("/")


class PluginServer:
    """Serves one DevicePlugin and keeps it registered with the kubelet.

    Use as `async with PluginServer(plugin, dir) as server: ...` or `await server.run()` (until
    `stop()` or, with `handle_signals`, SIGTERM/SIGINT; SIGHUP forces a re-registration). With
    `log_events` False the log says lifecycle events at DEBUG only: for callers that print them where
    the log goes (a terminal), so each is shown once. The plugin's CDI spec goes into `cdi_spec_dir`,
    else the plugin's own `cdi_spec_dir`, else /var/run/cdi.
    """

    def __init__(
        self,
        plugin: DevicePlugin,
        plugin_dir: str = DEFAULT_PLUGIN_DIR,
        *,
        use_inotify: bool = True,
        poll_interval: float = 0.5,
        debounce: float = 0.01,
        backoff: Backoff = Backoff(),
        register_timeout: float = DIAL_TIMEOUT_S + 5.0,
        plugin_watcher: bool = False,
        registry_dir: str = DEFAULT_REGISTRY_DIR,
        metrics: PluginMetrics | None = None,
        metrics_port: int | None = None,
        handle_signals: bool = False,
        on_event: EventHandler | None = None,
        log_events: bool = True,
        cdi_spec_dir: str | Path | None = None,
    ) -> None:
        self.plugin = plugin
        self.resource = check_resource_name(plugin.resource_name)
        try:
            self.source = plugin.describe_source()
        except NotImplementedError as exc:
            raise ConfigError(str(exc)) from exc
        self.plugin_watcher = plugin_watcher
        self.plugin_dir = os.path.abspath(registry_dir if plugin_watcher else plugin_dir)
        stem = socket_stem(self.resource)
        # Fail now, naming the path, rather than at bind time deep inside a retry loop.
        check_socket_path(os.path.join(self.plugin_dir, f"{stem}-{os.getpid()}-000.sock"))
        check_plugin_dir(self.plugin_dir)
        self._poll_interval = poll_interval
        self._debounce = debounce
        self._backoff = backoff
        self._register_timeout = register_timeout
        self._metrics_port = metrics_port
        self._handle_signals = handle_signals
        self.events = EventBus(self.resource, log_events=log_events)
        if on_event is not None:
            self.events.subscribe(on_event)
        self.metrics = metrics if metrics is not None else PluginMetrics(self.resource)
        spec_dir = cdi_spec_dir or plugin.cdi_spec_dir or DEFAULT_SPEC_DIR
        self.cdi = SpecFile(plugin.cdi_spec, Path(spec_dir).absolute(), self.events)
        self.inventory = Inventory(on_change=self._devices_changed)
        self.watcher = KubeletWatcher(
            self.plugin_dir, lambda: self.socket_path, use_inotify=use_inotify, poll_interval=poll_interval
        )
        self.watcher_service = WatcherRegistrationService(
            self.resource, lambda: self.socket_path or "", self.events
        )
        self.endpoints = PluginEndpoints(
            self.plugin_dir,
            stem,
            lambda: DevicePluginService(self.plugin, self.inventory, self.events, self.metrics),
            self.events,
            self.watcher_service if plugin_watcher else None,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_requested = asyncio.Event()
        self._force = False
        self._started = False
        self._stopped = False
        self.registrations = 0
        self._said_waiting = False
        self.metrics_http_port: int | None = None

    # ---- public facade -------------------------------------------------------------------------

    @property
    def socket_path(self) -> str | None:
        """Absolute path of the socket currently serving the DevicePlugin service, if any."""
        return self.endpoints.socket_path

    async def start(self) -> None:
        """Start following the device source and registering, and return at once (once only)."""
        if self._started:
            raise RuntimeError("PluginServer already started")
        self._started = True
        if self._metrics_port is not None:
            self.metrics_http_port = self.metrics.serve_http(self._metrics_port)
            log.info("metrics of %s on port %d", self.resource, self.metrics_http_port)
        loop = asyncio.get_running_loop()
        retry = getattr(self.plugin, "poll_interval", 5.0)
        self._tasks.append(loop.create_task(self.inventory.follow(self.plugin, retry), name="device-source"))
        self._tasks.append(loop.create_task(self.cdi.run(), name="cdi-spec"))
        if self._plugin_dir_exists():
            self.watcher.start()  # at once, so it sees every change from now on
        self._tasks.append(loop.create_task(self._lifecycle(), name="plugin-lifecycle"))
        if self._handle_signals:
            loop.add_signal_handler(signal.SIGTERM, self._stop_requested.set)
            loop.add_signal_handler(signal.SIGINT, self._stop_requested.set)
            loop.add_signal_handler(signal.SIGHUP, self.request_reregistration)

    @property
    def lifecycle(self) -> asyncio.Task[None] | None:
        """The registration lifecycle: runs until stopped, ends early only with an error."""
        return self._tasks[-1] if self._tasks else None

    async def run(self) -> None:
        """Start, serve until `stop()` is called or a stop signal arrives, then stop cleanly."""
        if not self._started:
            await self.start()
        try:
            lifecycle = self._tasks[-1]
            stop = asyncio.ensure_future(self._stop_requested.wait())
            await asyncio.wait({lifecycle, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if lifecycle.done() and not lifecycle.cancelled() and lifecycle.exception() is not None:
                raise lifecycle.exception()  # type: ignore[misc]
        finally:
            await self.stop()

    def request_stop(self) -> None:
        """Make `run()` stop and return, as SIGTERM does; callable from any coroutine of the loop."""
        self._stop_requested.set()

    def request_reregistration(self) -> None:
        """Serve on a new socket and register again, as after a kubelet restart (what SIGHUP does)."""
        log.info("re-registration of %s requested", self.resource)
        self._force = True
        self.watcher.changed.set()

    async def stop(self) -> None:
        """Stop streams and servers, remove our sockets. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_requested.set()
        if self._handle_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
        for task in self._tasks:
            await cancel_and_wait(task)
        await self.watcher.stop()
        await self.endpoints.close_all()
        await self.cdi.close()
        await self.metrics.close()
        self.events.emit(EventKind.STOPPED)

    async def __aenter__(self) -> PluginServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ---- kubelet.sock registration --------------------------------------------------------------

    async def _lifecycle(self) -> None:
        if self.watcher.mode == "stopped":
            await self._wait_for_plugin_dir()
            self.watcher.start()
        await (self._watcher_mode_lifecycle() if self.plugin_watcher else self._kubelet_lifecycle())

    def _plugin_dir_exists(self) -> bool:
        return os.path.isdir(self.plugin_dir)

    async def _wait_for_plugin_dir(self) -> None:
        if self._plugin_dir_exists():
            return
        self._say_waiting(self.plugin_dir, "the plugin directory")
        await wait_for_directory(self.plugin_dir, self._poll_interval)
        check_plugin_dir(self.plugin_dir)

    def _say_waiting(self, path: str, what: str) -> None:
        if self._said_waiting:
            return
        self._said_waiting = True
        log.log(self.events.said_level, "waiting for %s at %s", what, path)
        self.events.emit(EventKind.WAITING, path=path)

    async def _kubelet_lifecycle(self) -> None:
        await self.inventory.ready.wait()
        await self.cdi.settled()  # the spec defines the devices before the kubelet can ask for them
        registered_with: SocketIdentity | None = None
        restart_noticed = False
        while True:
            self.watcher.changed.clear()
            state = self.watcher.state()
            moved = registered_with is not None and (
                state.kubelet != registered_with or not state.own_socket_present
            )
            if moved and not restart_noticed and not self._force:
                restart_noticed = True
                self.metrics.count_kubelet_restart()
                why = "own-socket-deleted" if not state.own_socket_present else "kubelet.sock-created"
                log.log(self.events.said_level, "kubelet restart detected for %s (%s)", self.resource, why)
                self.events.emit(EventKind.KUBELET_RESTART, reason=why)
            needed = registered_with is None or restart_noticed or self._force
            if needed and state.kubelet is not None:
                self._force = False
                registered_with = await self._register_with_retry()
                restart_noticed = False
                continue
            if state.kubelet is None and registered_with is None:
                self._say_waiting(self.watcher.kubelet_socket, "kubelet.sock")
            await self.watcher.changed.wait()
            # A restart shows several signs in a burst (sockets deleted, kubelet.sock created):
            # look once the burst has settled.
            await asyncio.sleep(self._debounce)

    async def _register_with_retry(self) -> SocketIdentity:
        """Serve on a fresh socket and Register until it succeeds; return the kubelet.sock registered with."""
        await self.endpoints.serve_new()
        delays = iter(self._backoff.delays())
        attempt = 0
        while True:
            attempt += 1
            self.watcher.changed.clear()
            state = self.watcher.state()
            if state.kubelet is not None:
                if not state.own_socket_present:
                    await self.endpoints.serve_new()
                try:
                    await self._register_once()
                except grpc.aio.AioRpcError as exc:
                    self._registration_failed(exc, attempt)
                else:
                    await self.endpoints.retire_old()
                    return state.kubelet
            # Wake early when kubelet.sock appears: right after a restart that is the moment it can answer.
            delay = next(delays)
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
            # lands just as the event fires, and stop() would then wait forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self.watcher.changed.wait()

    async def _register_once(self) -> None:
        socket_path = self.endpoints.socket_path
        assert socket_path is not None
        request = dp.RegisterRequest(
            version=VERSION,
            endpoint=os.path.basename(socket_path),
            resource_name=self.resource,
            options=options_to_wire(self.plugin.options()),
        )
        async with grpc.aio.insecure_channel(f"unix://{self.watcher.kubelet_socket}") as channel:
            await dp_grpc.RegistrationStub(channel).Register(request, timeout=self._register_timeout)
        self.metrics.count_registration(ok=True)
        self.registrations += 1
        kind = EventKind.REGISTERED if self.registrations == 1 else EventKind.REREGISTERED
        endpoint = os.path.basename(socket_path)
        log.log(self.events.said_level, "%s %s with endpoint %s", kind, self.resource, endpoint)
        self.events.emit(kind, endpoint=endpoint, count=str(self.registrations))

    def _registration_failed(self, exc: grpc.aio.AioRpcError, attempt: int) -> None:
        self.metrics.count_registration(ok=False)
        message = exc.details() or str(exc.code())
        # A kubelet that is (re)starting refuses connections or closes the transport: expected, not an error.
        transient = exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        log.log(
            self.events.said_level if transient else logging.ERROR,
            "Register of %s failed (attempt %d, %s): %s",
            self.resource,
            attempt,
            exc.code().name,
            message,
        )
        self.events.emit(EventKind.REGISTER_FAILED, code=exc.code().name, attempt=str(attempt))

    # ---- plugin-watcher (probe mode) ------------------------------------------------------------

    async def _watcher_mode_lifecycle(self) -> None:
        # The kubelet's plugin watcher finds the socket itself and rescans on its own restart;
        # all we must do is keep a live socket in the registry directory.
        await self.inventory.ready.wait()
        await self.cdi.settled()
        await self.endpoints.serve_new()
        while True:
            self.watcher.changed.clear()
            if self._force or not self.watcher.state().own_socket_present:
                self._force = False
                await self.endpoints.serve_new()
                await self.endpoints.retire_old()
                continue
            await self.watcher.changed.wait()
            await asyncio.sleep(self._debounce)

    def _devices_changed(self, devices: tuple[Device, ...]) -> None:
        self.cdi.devices_changed(devices)
        self.metrics.observe_devices(devices)
        healthy = sum(1 for d in devices if d.healthy)
        self.events.emit(EventKind.DEVICES, healthy=str(healthy), unhealthy=str(len(devices) - healthy))


def check_plugin_dir(directory: str) -> None:
    """Refuse a plugin directory that cannot be used now or ever; a missing one is waited for, not created.

    The kubelet owns the directory and creates it when it starts; a plugin that created it could leave a
    directory the kubelet then finds with the wrong owner or mode.
    """
    existing = directory
    while not os.path.lexists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            return
        existing = parent
    if not os.path.isdir(existing):
        raise ConfigError(
            f"plugin directory {directory} can never exist: {existing} is a file, not a folder — "
            "give the kubelet's device plugin directory"
        )
    if existing == directory and not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(
            f"plugin directory {directory} is not writable — run the plugin as the kubelet's user or give "
            "it write access"
        )
