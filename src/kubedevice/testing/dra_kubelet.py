"""The `dra_kubelet` fixture: the node side of DRA in the test's event loop, on a temporary kubelet folder.

It is the node daemon's DRA part without the daemon: the DRA manager (`kubedevice.dra.DRAManager`) behind a
plugins_registry watcher, with claims given inline instead of by an API server. A DRA driver built on the SDK
finds everything where it would beside `kubedevice node`: it registers in `plugins_registry/`, reads the
node's name and each claim from the daemon's status API (`GET /node`, `GET /claims/<ns>/<name>` on
`kubedevice.sock`), and publishes its slices in `resourceslices/<driver>.yaml`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kubedevice.api.constants import DRA_PLUGIN_TYPE
from kubedevice.dra import (
    AllocationResult,
    ClaimNotFoundError,
    ConsumerReference,
    ContainerClaim,
    DeviceRequestAllocationResult,
    DRAContainer,
    DRAError,
    DRAManager,
    DRAPod,
    PodClaim,
    ResourceClaim,
)
from kubedevice.dra.plugins import DriverStatus
from kubedevice.plugin import DevicePlugin
from kubedevice.plugin.dra.backend.slice_file import slice_file
from kubedevice.plugin.dra.backend.standalone import StandaloneBackend
from kubedevice.plugin.dra.runner import FacesServer
from kubedevice.plugin.errors import ConfigError
from kubedevice.pluginwatcher.handler import WatcherOptions
from kubedevice.pluginwatcher.watcher import PluginWatcher
from kubedevice.statusapi.stand_in import StandInStatusAPI
from kubedevice.testing.kubelet import RECHECK_S, PluginCallFailed

T = TypeVar("T")
#: The node the stand-in kubelet runs on; a standalone driver names its pool after it.
NODE_NAME = "kubedevice-test-node"


@dataclass
class _Claim:
    """An inline claim: request -> device names of `driver` in the node's pool, and the pods it serves."""

    name: str
    namespace: str
    uid: str
    driver: str
    devices: Mapping[str, tuple[str, ...]]
    pods: list[ConsumerReference] = field(default_factory=list)

    def results(self, pool: str) -> tuple[DeviceRequestAllocationResult, ...]:
        return tuple(
            DeviceRequestAllocationResult(request, self.driver, pool, device)
            for request, devices in self.devices.items()
            for device in devices
        )

    def resource_claim(self, pool: str) -> ResourceClaim:
        allocation = AllocationResult(self.results(pool))
        return ResourceClaim(self.namespace, self.name, self.uid, allocation, tuple(self.pods))

    def to_json(self, pool: str) -> dict[str, Any]:
        results = [
            {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
            for r in self.results(pool)
        ]
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
            "spec": {"devices": {"requests": [{"name": request} for request in self.devices]}},
            "status": {
                "allocation": {"devices": {"results": results, "config": []}},
                "reservedFor": [{"resource": "pods", "name": p.name, "uid": p.uid} for p in self.pods],
            },
        }


class StandInDRAKubelet:
    """A DRA manager, its plugins_registry watcher and the daemon's claim API in `kubelet_dir`.

    Every wait fails with a one-line AssertionError after `timeout` seconds (per call or the default).
    """

    def __init__(self, kubelet_dir: Path, *, timeout: float = 10.0) -> None:
        self.kubelet_dir = Path(kubelet_dir)
        self.timeout = timeout
        self._claims: dict[tuple[str, str], _Claim] = {}
        self._status = StandInStatusAPI(self.kubelet_dir, NODE_NAME)
        self._manager: DRAManager | None = None
        self._watcher: PluginWatcher | None = None
        self._plugins: list[FacesServer] = []

    @property
    def node_name(self) -> str:
        """The node name the status API reports: the pool of the driver's devices."""
        return self._status.node_name

    @node_name.setter
    def node_name(self, name: str) -> None:
        self._status.node_name = name

    @property
    def manager(self) -> DRAManager:
        """The DRA manager itself, for what the kit does not wrap (claim_infos, drivers...)."""
        assert self._manager is not None, "the DRA kubelet is not started"
        return self._manager

    async def start(self) -> None:
        await self._status.start()
        await self._start_manager()

    async def _start_manager(self) -> None:
        manager = DRAManager(self.kubelet_dir, claims=self, call_timeout=self.timeout)
        await manager.start()
        options = WatcherOptions(dial=self.timeout, get_info=self.timeout, notify=self.timeout, interval=0.05)
        watcher = PluginWatcher(
            self.kubelet_dir / "plugins_registry", {DRA_PLUGIN_TYPE: manager.plugin_handler}, options=options
        )
        watcher.start()
        self._manager, self._watcher = manager, watcher

    async def _stop_manager(self) -> None:
        if self._watcher is not None:
            await self._watcher.stop()
        if self._manager is not None:
            await self._manager.stop()
        self._watcher = self._manager = None

    async def close(self) -> None:
        """Stop every driver served through serve_plugin, then the kubelet itself."""
        for server in reversed(self._plugins):
            await server.stop()
        await self._stop_manager()
        await self._status.stop()

    async def restart(self) -> None:
        """A kubelet restart: the DRA manager starts again from its checkpoint, drivers register again."""
        await self._stop_manager()
        await self._start_manager()

    async def serve_plugin(self, plugin: DevicePlugin, **options: Any) -> FacesServer:
        """Run `plugin`'s DRA face in this event loop against this kubelet, until the test ends.

        CDI spec files go into the plugin's `cdi_spec_dir`, else `<kubelet_dir>/cdi`, unless
        `dra_options={"cdi_spec_dir": ...}` says otherwise; `options` are FacesServer's.
        """
        __tracebackhide__ = True
        backend = StandaloneBackend(
            kubelet_dir=self.kubelet_dir, driver_name=plugin.driver_name, node_name=self.node_name
        )
        try:
            server = FacesServer(
                plugin,
                "dra",
                kubelet_dir=self.kubelet_dir,
                backend=backend,
                **options,
            )
            await server.start()
        except (ConfigError, OSError) as err:
            raise AssertionError(f"cannot serve {type(plugin).__name__}: {err}") from None
        self._plugins.append(server)
        return server

    # -- claims ------------------------------------------------------------------------------------

    def add_claim(
        self,
        name: str,
        devices: Mapping[str, str | Sequence[str]],
        *,
        driver: str | None = None,
        namespace: str = "default",
    ) -> str:
        """An allocated claim: `{request: device or [devices]}` of `driver` (the only registered one when
        left out) in this node's pool. Returns its UID."""
        chosen = driver or self._only_driver()
        allocated = {r: (d,) if isinstance(d, str) else tuple(d) for r, d in devices.items()}
        claim = _Claim(name, namespace, f"uid-{namespace}-{name}", chosen, allocated)
        self._claims[(namespace, name)] = claim
        self._status.put_claim(namespace, name, lambda: claim.to_json(self.node_name))
        return claim.uid

    async def get_claim(self, namespace: str, name: str) -> ResourceClaim:
        """The DRA manager's ClaimSource: the inline claims."""
        claim = self._claims.get((namespace, name))
        if claim is None:
            raise ClaimNotFoundError(namespace, name)
        return claim.resource_claim(self.node_name)

    def _pod(self, names: Sequence[str], namespace: str) -> DRAPod:
        pod = DRAPod(
            f"pod-{namespace}-{'-'.join(names)}",
            namespace,
            f"pod-{'-'.join(names)}",
            resource_claims=tuple(PodClaim(n, resource_claim_name=n) for n in names),
            containers=(DRAContainer("main", tuple(ContainerClaim(n) for n in names)),),
        )
        for name in names:
            claim = self._claims.get((namespace, name))
            if claim is None:
                raise AssertionError(f"no claim {namespace}/{name}: add it with add_claim() first")
            if not any(p.uid == pod.uid for p in claim.pods):
                claim.pods.append(ConsumerReference("pods", pod.name, pod.uid))
        return pod

    async def prepare(self, *claims: str, namespace: str = "default") -> list[str]:
        """Prepare the claims for one pod, as the kubelet does before its sandbox; the container's CDI IDs."""
        __tracebackhide__ = True
        pod = self._pod(claims, namespace)
        try:
            await self.manager.prepare_resources(pod)
        except DRAError as err:
            raise PluginCallFailed(str(err)) from None
        return self.manager.get_resources(pod, pod.containers[0])

    async def unprepare(self, *claims: str, namespace: str = "default") -> None:
        """Unprepare what prepare(*claims) prepared, as the kubelet does once the pod's containers stopped."""
        __tracebackhide__ = True
        try:
            await self.manager.unprepare_resources(self._pod(claims, namespace))
        except DRAError as err:
            raise PluginCallFailed(str(err)) from None

    # -- what the node sees ------------------------------------------------------------------------

    def drivers(self) -> list[DriverStatus]:
        return self.manager.drivers()

    async def wait_registered(self, driver: str | None = None, timeout: float | None = None) -> DriverStatus:
        """The driver with a connected endpoint; waits for its registration."""
        __tracebackhide__ = True

        def registered() -> DriverStatus | None:
            return next(
                (
                    d
                    for d in self.manager.drivers()
                    if driver in (None, d.name) and any(e.connected for e in d.endpoints)
                ),
                None,
            )

        who = driver or "a DRA driver"
        return await self.wait_for(registered, timeout, f"{who} registered")

    def slices(self, driver: str | None = None) -> list[dict[str, Any]]:
        """The devices of the driver's published ResourceSlices (`name`, `attributes`, `capacity`)."""
        path = slice_file(self.kubelet_dir, driver or self._only_driver())
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        documents = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        return [device for d in documents for device in (d.get("spec") or {}).get("devices") or []]

    def device_status(self, claim: str, namespace: str = "default") -> list[dict[str, Any]]:
        """The claim's `status.devices` as its drivers wrote them (`set_device_status`, conditions)."""
        return self._status.device_status(namespace, claim)

    def health(self, driver: str | None = None) -> dict[str, str]:
        """Device name -> "Healthy", "Unhealthy" or "Unknown", as the driver's health stream said."""
        return {
            d: h.health for (_, d), h in self.manager.device_health(driver or self._only_driver()).items()
        }

    def checkpoint(self) -> dict[str, Any]:
        """The DRA manager's checkpoint file, its inner document decoded."""
        outer = json.loads((self.kubelet_dir / "dra_manager_state").read_text())
        inner: dict[str, Any] = json.loads(outer["Data"])
        return inner

    async def wait_for(
        self, predicate: Callable[[], T | None], timeout: float | None = None, what: str | None = None
    ) -> T:
        """Wait until `predicate()` is true and return its value, looking again every 50 ms."""
        __tracebackhide__ = True
        limit = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while True:
            value = predicate()
            if value:
                return value
            crashed = self._crashed_plugin()
            if crashed is not None:
                raise AssertionError(f"{what or 'the condition'} not met; {crashed}")
            if loop.time() >= deadline:
                raise AssertionError(
                    f"{what or 'the condition'} not met within {limit:g} s; {self.summary()}"
                )
            await asyncio.sleep(RECHECK_S)

    def summary(self) -> str:
        drivers = self.manager.drivers() if self._manager is not None else []
        if not drivers:
            return "no DRA driver registered"
        return "; ".join(
            f"{d.name}: {sum(e.connected for e in d.endpoints)} of {len(d.endpoints)} endpoints connected"
            for d in drivers
        )

    def _crashed_plugin(self) -> str | None:
        for server in self._plugins:
            dra = server.dra
            task = dra.lifecycle if dra is not None else None
            if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
                return f"the DRA face of {server.plugin.driver_name} failed: {task.exception()}"
        return None

    def _only_driver(self) -> str:
        names = sorted(
            {d.name for d in self.manager.drivers()} | {s.plugin.driver_name for s in self._plugins}
        )
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise AssertionError(f"pass driver=: {len(names)} DRA drivers are known ({listed})")
        return names[0]
