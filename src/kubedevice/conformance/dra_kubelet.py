"""The stand-in kubelet's DRA side: a plugins_registry watcher for DRA drivers, and the node daemon's claims.

Registration goes through the node side's own pieces: the plugins_registry watcher
(`kubedevice.pluginwatcher`) hands every `DRAPlugin` socket to the DRA manager's plugin store
(`kubedevice.dra.plugins.DRAPlugins`), which validates it as the kubelet does, connects to its endpoint
and follows its health stream. Every verdict is recorded so the checks can say what went wrong.

A standalone driver reads claims and the node name from the node daemon's status API on
`<kubelet_dir>/kubedevice.sock` (`GET /claims/<namespace>/<name>`, `GET /node`); the daemon's own HTTP
server serves the claims the checks make, as the daemon would.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubedevice.api.constants import DEVICE_PLUGIN_TYPE, DRA_PLUGIN_TYPE
from kubedevice.dra.client import DRAPluginClient
from kubedevice.dra.health import DeviceHealthInfo
from kubedevice.dra.metrics import DRAMetrics
from kubedevice.dra.plugins import DRAPlugins
from kubedevice.dra.registration import DRARegistrationHandler
from kubedevice.pluginwatcher.handler import PluginHandler, PluginHandlerError, WatcherOptions
from kubedevice.pluginwatcher.watcher import PluginWatcher
from kubedevice.statusapi.stand_in import StandInStatusAPI

#: The node name the stand-in daemon reports; a standalone driver names its pool after it.
NODE_NAME = "kubedevice-conformance"
#: Plugin types a DRA driver might send by mistake; anything else is refused by the watcher itself.
_OTHER_TYPES = (DEVICE_PLUGIN_TYPE, "CSIPlugin")


@dataclass(frozen=True)
class DRARegistration:
    """One registration through plugins_registry as the kubelet judged it; `refusal` is "" when accepted."""

    received_at: float
    type: str
    name: str
    endpoint: str
    versions: tuple[str, ...]
    refusal: str = ""

    @property
    def accepted(self) -> bool:
        return not self.refusal


class _Recorder:
    """The DRAPlugin handler of the plugin store, with every verdict recorded."""

    def __init__(
        self, plugin_type: str, inner: PluginHandler | None, record: Callable[[DRARegistration], None]
    ) -> None:
        self._type = plugin_type
        self._inner = inner
        self._record = record

    def _entry(self, name: str, endpoint: str, versions: Sequence[str], refusal: str = "") -> DRARegistration:
        now = asyncio.get_running_loop().time()
        return DRARegistration(now, self._type, name, endpoint, tuple(versions), refusal)

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        if self._inner is None:
            refusal = (
                f"plugin type {self._type} registered in plugins_registry, where a DRA driver is DRAPlugin"
            )
            self._record(self._entry(name, endpoint, versions, refusal))
            raise PluginHandlerError(refusal)
        try:
            self._inner.validate_plugin(name, endpoint, versions)
        except PluginHandlerError as err:
            self._record(self._entry(name, endpoint, versions, str(err)))
            raise

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        assert self._inner is not None  # validate_plugin refused the other types
        try:
            await self._inner.register_plugin(name, endpoint, versions)
        except PluginHandlerError as err:
            self._record(self._entry(name, endpoint, versions, str(err)))
            raise
        self._record(self._entry(name, endpoint, versions))

    async def deregister_plugin(self, name: str, endpoint: str) -> None:
        if self._inner is not None:
            await self._inner.deregister_plugin(name, endpoint)


class DRAKubelet:
    """plugins_registry and the daemon's claim API in `kubelet_dir`, for one conformance run."""

    def __init__(self, kubelet_dir: Path, timeout_s: float, *, watch_interval: float = 0.05) -> None:
        self.kubelet_dir = kubelet_dir
        self.registry_dir = kubelet_dir / "plugins_registry"
        self._timeout_s = timeout_s
        self._options = WatcherOptions(
            dial=timeout_s, get_info=timeout_s, notify=timeout_s, interval=watch_interval
        )
        self._registrations: asyncio.Queue[DRARegistration] = asyncio.Queue()
        self._plugins: DRAPlugins | None = None
        self._watcher: PluginWatcher | None = None
        self._status = StandInStatusAPI(kubelet_dir, NODE_NAME)

    @property
    def node_name(self) -> str:
        """The node name `/node` reports; a standalone driver names its pool after it."""
        return self._status.node_name

    async def start(self) -> None:
        await asyncio.to_thread(self.registry_dir.mkdir, mode=0o750, parents=True, exist_ok=True)
        await self._status.start()
        # A long wipe delay: nothing here wipes slices, and health comes back quickly after a reconnect.
        self._plugins = DRAPlugins(
            metrics=DRAMetrics(CollectorRegistry()),
            call_timeout=self._timeout_s,
            wipe_delay=3600.0,
            health_retry=0.2,
        )
        handlers: dict[str, PluginHandler] = {
            DRA_PLUGIN_TYPE: _Recorder(
                DRA_PLUGIN_TYPE, DRARegistrationHandler(self._plugins), self._registrations.put_nowait
            )
        }
        for other in _OTHER_TYPES:
            handlers[other] = _Recorder(other, None, self._registrations.put_nowait)
        self._watcher = PluginWatcher(self.registry_dir, handlers, options=self._options)
        self._watcher.start()

    async def stop(self) -> None:
        if self._watcher is not None:
            await self._watcher.stop()
            self._watcher = None
        if self._plugins is not None:
            await self._plugins.stop()
            self._plugins = None
        await self._status.stop()

    async def next_registration(self, timeout_s: float) -> DRARegistration | None:
        try:
            return await asyncio.wait_for(self._registrations.get(), timeout=max(timeout_s, 0.0))
        except TimeoutError:
            return None

    def forget_registrations(self) -> list[DRARegistration]:
        seen: list[DRARegistration] = []
        while not self._registrations.empty():
            seen.append(self._registrations.get_nowait())
        return seen

    def client(self, driver: str) -> DRAPluginClient:
        """The endpoint the kubelet would call for `driver` (the newest connected one)."""
        assert self._plugins is not None, "the DRA kubelet is not started"
        return self._plugins.get(driver)

    def device_health(self, driver: str) -> dict[tuple[str, str], DeviceHealthInfo]:
        return self._plugins.device_health(driver) if self._plugins is not None else {}

    def put_claim(self, claim: dict[str, Any]) -> None:
        """Serve `claim` (resource.k8s.io/v1 JSON) at GET /claims/<namespace>/<name>."""
        meta = claim["metadata"]
        self._status.put_claim(meta["namespace"], meta["name"], lambda: claim)

    async def recreate_registry(self) -> None:
        """The plugins_registry folder replaced by a new, empty one, the old one removed with its sockets.

        Moved aside first, so the path is never without a folder: a driver that serves its socket again
        the moment it sees it gone finds the new folder there.
        """

        def recreate() -> None:
            old = self.registry_dir.with_name(f".{self.registry_dir.name}-old")
            self.registry_dir.rename(old)
            self.registry_dir.mkdir(mode=0o750)
            shutil.rmtree(old, ignore_errors=True)

        await asyncio.to_thread(recreate)


def claim(
    name: str, uid: str, driver: str, pool: str, devices: Sequence[str], namespace: str = "default"
) -> dict[str, Any]:
    """An allocated resource.k8s.io/v1 ResourceClaim: request `r<i>` gets `devices[i]` of `pool`."""
    results = [
        {"request": f"r{index}", "driver": driver, "pool": pool, "device": device}
        for index, device in enumerate(devices)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"devices": {"requests": [{"name": r["request"]} for r in results]}},
        "status": {"allocation": {"devices": {"results": results, "config": []}}},
    }
