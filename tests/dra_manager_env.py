"""A DRAManager behind a real plugins_registry watcher, with claims kept in a dictionary, for tests.

async with dra_manager_env() as env:
    plugin = await env.start_plugin()            # a raw DRA plugin (tests/dra_plugin.py), registered
    env.claims.put(allocated_claim("c1", "u1", pod, plugin.driver, "gpu-0"))
    await env.manager.prepare_resources(pod)
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubedevice.api.constants import DRA_PLUGIN_TYPE
from kubedevice.checkpoint import DRACheckpointData, decode_dra
from kubedevice.dra import (
    AllocationResult,
    ClaimNotFoundError,
    ConsumerReference,
    ContainerClaim,
    DeviceRequestAllocationResult,
    DRAContainer,
    DRAManager,
    DRAPod,
    PodClaim,
    ResourceClaim,
)
from kubedevice.pluginwatcher.handler import WatcherOptions
from kubedevice.pluginwatcher.watcher import PluginWatcher
from tests.dra_plugin import Device, DRATestPlugin
from tests.waiting import short_tempdir

OPTIONS = WatcherOptions(dial=5.0, get_info=2.0, notify=5.0, interval=0.05)


class DictClaims:
    """A ClaimSource over a dictionary: what an API server would answer."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], ResourceClaim] = {}

    def put(self, claim: ResourceClaim) -> ResourceClaim:
        self.claims[(claim.namespace, claim.name)] = claim
        return claim

    async def get_claim(self, namespace: str, name: str) -> ResourceClaim:
        try:
            return self.claims[(namespace, name)]
        except KeyError:
            raise ClaimNotFoundError(namespace, name) from None


def pod(uid: str, *claims: str, name: str | None = None, namespace: str = "default") -> DRAPod:
    """A pod whose container `main` uses each named claim through a pod claim of the same name."""
    return DRAPod(
        uid,
        namespace,
        name or uid.lower(),
        resource_claims=tuple(PodClaim(c, resource_claim_name=c) for c in claims),
        containers=(DRAContainer("main", tuple(ContainerClaim(c) for c in claims)),),
    )


def allocated(
    name: str,
    uid: str,
    pods: Iterable[DRAPod],
    *results: tuple[str, str, str],
    namespace: str = "default",
) -> ResourceClaim:
    """A claim reserved for `pods` whose allocation gives (request, driver, device) in pool node-1."""
    return ResourceClaim(
        namespace,
        name,
        uid,
        allocation=AllocationResult(
            tuple(DeviceRequestAllocationResult(r, d, "node-1", dev) for r, d, dev in results)
        ),
        reserved_for=tuple(ConsumerReference("pods", p.name, p.uid) for p in pods),
    )


def gpu(name: str, request: str = "gpu", driver: str = "gpu.example.com") -> Device:
    return Device("node-1", name, request_names=(request,), cdi_device_ids=(f"{driver}/gpu={name}",))


@dataclass
class DRAManagerEnv:
    root: Path
    registry: Path
    sockets: Path
    claims: DictClaims
    prometheus: CollectorRegistry
    manager: DRAManager
    watcher: PluginWatcher
    manager_kwargs: dict[str, Any]
    plugins: list[DRATestPlugin] = field(default_factory=list)
    wiped: list[str] = field(default_factory=list)
    active: set[str] = field(default_factory=set)

    async def start_plugin(self, driver: str = "gpu.example.com", **kwargs: Any) -> DRATestPlugin:
        """A raw plugin started and registered (its NotifyRegistrationStatus received)."""
        plugin = DRATestPlugin(self.registry, self.sockets, driver=driver, **kwargs)
        self.plugins.append(plugin)
        await plugin.start()
        status = await plugin.wait_for_status()
        assert status.plugin_registered, status.error
        return plugin

    def checkpoint(self) -> DRACheckpointData:
        return decode_dra(self.manager.checkpoint_path.read_bytes())

    def checkpoint_claims(self) -> dict[str, tuple[set[str], dict[str, list[str]]]]:
        """namespace/name -> (pod UIDs, driver -> device names) as the file on disk says."""
        found: dict[str, tuple[set[str], dict[str, list[str]]]] = {}
        for c in self.checkpoint().claims or ():
            drivers = {d: [x.device_name for x in devs or ()] for d, devs in (c.driver_state or {}).items()}
            found[f"{c.namespace}/{c.claim_name}"] = (set(c.pod_uids or ()), drivers)
        return found

    async def restart_manager(self, **overrides: Any) -> DRAManager:
        """Stop the manager and start a new one on the same root (a daemon restart)."""
        await self.watcher.stop()
        await self.manager.stop()
        self.manager, self.watcher = await _start(self, {**self.manager_kwargs, **overrides})
        return self.manager


async def _start(env: DRAManagerEnv, kwargs: dict[str, Any]) -> tuple[DRAManager, PluginWatcher]:
    env.prometheus = CollectorRegistry()  # a new manager registers its metrics afresh
    manager = DRAManager(
        env.root,
        claims=env.claims,
        registry=env.prometheus,
        on_wipe=env.wiped.append,
        active_pods=lambda: env.active,
        **kwargs,
    )
    await manager.start()
    watcher = PluginWatcher(env.registry, {DRA_PLUGIN_TYPE: manager.plugin_handler}, options=OPTIONS)
    watcher.start()
    return manager, watcher


@asynccontextmanager
async def dra_manager_env(**kwargs: Any) -> AsyncIterator[DRAManagerEnv]:
    """A started env; `kwargs` go to DRAManager (call_timeout, wipe_delay, reconcile_period...)."""
    root = short_tempdir("kd-dram-")
    registry, sockets = root / "plugins_registry", root / "plugins"
    sockets.mkdir()
    env = DRAManagerEnv(root, registry, sockets, DictClaims(), CollectorRegistry(), None, None, kwargs)  # type: ignore[arg-type]
    env.manager, env.watcher = await _start(env, kwargs)
    try:
        yield env
    finally:
        await env.watcher.stop()
        await env.manager.stop()
        for plugin in env.plugins:
            await plugin.stop()
        shutil.rmtree(root, ignore_errors=True)
