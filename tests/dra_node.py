"""The node side of DRA registration for tests: a DRA plugin store behind a plugins_registry watcher."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubedevice.api.constants import DRA_PLUGIN_TYPE
from kubedevice.dra.metrics import DRAMetrics
from kubedevice.dra.plugins import DRAPlugins
from kubedevice.dra.registration import DRARegistrationHandler
from kubedevice.pluginwatcher.handler import PluginHandler, WatcherOptions
from kubedevice.pluginwatcher.watcher import PluginWatcher
from tests.waiting import short_tempdir

#: The watcher's timeouts for tests: a short poll interval where inotify is not used.
OPTIONS = WatcherOptions(dial=5.0, get_info=2.0, notify=5.0, interval=0.05)


@dataclass
class DRANode:
    """A registry directory, a folder for plugin sockets, the store and the watcher that feeds it."""

    registry: Path
    sockets: Path
    plugins: DRAPlugins
    prometheus: CollectorRegistry
    wiped: list[str] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.prometheus.get_sample_value(name, labels)


@asynccontextmanager
async def dra_node(
    *,
    extra_handlers: dict[str, PluginHandler] | None = None,
    clock: Callable[[], float] | None = None,
    **kwargs: Any,
) -> AsyncIterator[DRANode]:
    """A started DRANode; DRAPlugins takes `kwargs` (call_timeout, wipe_delay, health_timeout...)."""
    root = short_tempdir("kd-dra-")
    registry, sockets = root / "plugins_registry", root / "plugins"
    sockets.mkdir()
    prometheus = CollectorRegistry()
    node = DRANode(registry, sockets, None, prometheus)  # type: ignore[arg-type]
    if clock is not None:
        kwargs["clock"] = clock
    node.plugins = DRAPlugins(
        metrics=DRAMetrics(prometheus),
        on_wipe=node.wiped.append,
        on_registered=node.registered.append,
        **kwargs,
    )
    watcher = PluginWatcher(
        registry,
        {DRA_PLUGIN_TYPE: DRARegistrationHandler(node.plugins), **(extra_handlers or {})},
        options=OPTIONS,
    )
    watcher.start()
    try:
        yield node
    finally:
        await watcher.stop()
        await node.plugins.stop()
        shutil.rmtree(root, ignore_errors=True)
