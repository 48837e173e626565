"""The node daemon: a device manager and a DRA manager fed with pods and claims from a manifest folder,
plus PodResources and a status API.

The daemon wires the parts and owns their lifecycle: the device manager, the control plane and the DRA
manager (node.dra_startup; DRA drivers register through the same plugins_registry watcher as device
plugins), the pods of the manifest folder (node.pod_sync, node.pod_workers), PodResources v1, the status
API and the node status loop (which, like the kubelet's, calls GetCapacity every second and so ends the
stop grace period of plugins that left).

A restart is the kubelet restarting, and plugins wait for kubelet.sock: the daemon imports what only serves
after it (pod sync and manifests, PodResources, the status API, prometheus_client) once it is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from typing import TYPE_CHECKING

import grpc.aio

from kubedevice.manager import DeviceManager
from kubedevice.node.boot import current_boot_id
from kubedevice.node.checkpoint_guard import DRACheckpointRefused, check_dra_checkpoint
from kubedevice.node.config import (
    CHECKPOINT_FAULT_ENV,
    NodeConfig,
    NodePaths,
    NodeStartError,
    checkpoint_fault_from_env,
    make_dirs,
)
from kubedevice.node.pods import PodTable
from kubedevice.node.sockets import serve_grpc, socket_is_served
from kubedevice.node.topology import TopologyStartError, build_topology_manager
from kubedevice.topology import TopologyManager

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubedevice.dra import DRAManager
    from kubedevice.node.dra_startup import DRAParts
    from kubedevice.node.pod_sync import PodSync
    from kubedevice.node.podresources import PodResourcesMetrics
    from kubedevice.node.state import PodStateFile
    from kubedevice.pluginwatcher.watcher import PluginWatcher
    from kubedevice.statusapi.http import StatusServer

__all__ = [
    "CHECKPOINT_FAULT_ENV",
    "NodeConfig",
    "NodeDaemon",
    "NodePaths",
    "NodeStartError",
    "checkpoint_fault_from_env",
    "socket_is_served",
]

log = logging.getLogger(__name__)


class NodeDaemon:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.paths = NodePaths.under(config.root_dir, config.pod_manifest_path)
        self.pods = PodTable()
        self.manager: DeviceManager | None = None
        self.topology: TopologyManager | None = None
        self._state: PodStateFile | None = None
        self._sync: PodSync | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._grpc: grpc.aio.Server | None = None
        self._status: StatusServer | None = None
        self.dra: DRAManager | None = None
        self._dra: DRAParts | None = None
        self._watcher: PluginWatcher | None = None

    @functools.cached_property
    def registry(self) -> CollectorRegistry:
        """One registry for the manager's, the topology manager's, PodResources' and the daemon's metrics."""
        from prometheus_client import CollectorRegistry  # made once kubelet.sock is served (see start)

        return CollectorRegistry()

    @property
    def bad_files(self) -> dict[str, str]:
        """manifest file -> why it could not be read."""
        return self._sync.bad_files if self._sync is not None else {}

    @property
    def status_tcp_address(self) -> tuple[str, int] | None:
        return self._status.tcp_address if self._status is not None else None

    def _require_manager(self) -> DeviceManager:
        if self.manager is None:
            raise RuntimeError("the node daemon is not started")
        return self.manager

    def _require_topology(self) -> TopologyManager:
        if self.topology is None:
            raise RuntimeError("the node daemon is not started")
        return self.topology

    async def start(self) -> None:
        paths = self.paths
        # Everything that can refuse the start is checked before a folder is made: a refused start
        # leaves nothing behind.
        problem = paths.socket_path_problem()
        if problem is not None:
            raise NodeStartError(problem)
        try:
            topology = await build_topology_manager(self.config.topology, self.config.numa_nodes)
        except TopologyStartError as err:
            raise NodeStartError(str(err)) from None
        if await socket_is_served(paths.kubelet_socket):
            raise NodeStartError(
                f"another process is serving {paths.kubelet_socket}; is a node daemon already running?"
            )
        try:
            await asyncio.to_thread(check_dra_checkpoint, paths.root, self.config.dra_state_recovery)
        except DRACheckpointRefused as err:
            raise NodeStartError(str(err)) from None
        created = await asyncio.to_thread(make_dirs, paths)
        if paths.manifests in created:
            log.info(
                "created the manifest folder %s: pods are read from its *.yaml, *.yml and *.json",
                paths.manifests,
            )
        timeout = self.config.plugin_timeout
        try:
            manager = DeviceManager(
                paths.plugin_dir,
                stop_grace_period=self.config.stop_grace_period,
                active_pods=self.pods.active_uids,
                allocate_timeout=timeout,
                preferred_allocation_timeout=timeout,
                pre_start_timeout=timeout,
                checkpoint_fault=checkpoint_fault_from_env(os.environ),
                # Pod sync waits for the checkpoint itself, after the resource's Allocate lock is let go.
                checkpoint_each_allocate=False,
                affinity=topology,
                numa_nodes=[n.id for n in topology.machine.nodes] if topology.machine else None,
            )
        except ValueError as err:
            raise NodeStartError(str(err)) from None
        # The device manager is the topology manager's hint provider and reads its chosen hints back.
        topology.add_hint_provider(manager)
        self.topology = topology
        # Nothing is garbage-collected until the manifest folder has been read once (sourcesReady).
        manager.sources_ready = False
        try:
            await manager.start()
        except RuntimeError as err:
            raise NodeStartError(str(err)) from None
        self.manager = manager
        # kubelet.sock is served: what follows is imported only now (see the module's docstring).
        from kubedevice.node.dra_startup import start_dra
        from kubedevice.node.metrics import NodeMetrics
        from kubedevice.node.pod_sync import PodSync
        from kubedevice.node.podresources import PodResourcesMetrics
        from kubedevice.node.state import PodStateFile

        try:
            self._dra = await start_dra(
                self.config, paths, active_pods=self.pods.active_uids, registry=self.registry
            )
            self.dra = self._dra.manager
            self._start_plugin_watcher()
        except BaseException:
            await self.stop()
            raise

        node_metrics = NodeMetrics(self.registry, self.pods.count_by_phase)
        podresources_metrics = PodResourcesMetrics(self.registry)
        topology.metrics.register(self.registry)
        manager.metrics.register(self.registry)
        self._state = PodStateFile(paths.state_file, current_boot_id(self.config.boot_id))
        dra = self._require_dra()
        self._sync = PodSync(
            self.config,
            paths,
            manager,
            topology,
            self.pods,
            self._state,
            node_metrics,
            dra.control,
            dra.dynamic,
        )
        try:
            await self._sync.start()
            await self._serve(podresources_metrics)
        except BaseException:
            await self.stop()
            raise
        self._loops.append(asyncio.create_task(self._status_loop(), name="node status"))
        tcp = self.status_tcp_address
        log.info(
            "node daemon ready: root %s, manifests %s, status API on %s%s",
            paths.root,
            paths.manifests,
            paths.status_socket,
            f" and http://{tcp[0]}:{tcp[1]}" if tcp else "",
        )

    def _start_plugin_watcher(self) -> None:
        """One plugins_registry watcher for both managers' plugins: device plugins and DRA drivers."""
        from kubedevice.api import constants
        from kubedevice.pluginwatcher import WatcherOptions
        from kubedevice.pluginwatcher.watcher import PluginWatcher

        manager, dra = self._require_manager(), self._require_dra()
        handlers = {
            constants.DEVICE_PLUGIN_TYPE: manager.plugin_handler,
            constants.DRA_PLUGIN_TYPE: dra.dynamic.plugin_handler(),
        }
        self._watcher = PluginWatcher(self.paths.plugins_registry, handlers, options=WatcherOptions())
        self._watcher.start()

    def _require_dra(self) -> DRAParts:
        if self._dra is None:
            raise RuntimeError("the node daemon is not started")
        return self._dra

    async def _serve(self, podresources_metrics: PodResourcesMetrics) -> None:
        from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
        from kubedevice.node.podresources import PodResourcesServicer
        from kubedevice.node.status_api import StatusAPI
        from kubedevice.statusapi.http import StatusServer

        paths = self.paths
        servicer = PodResourcesServicer(
            self._require_manager(),
            lambda: [(r.pod, r.active) for r in self.pods],
            podresources_metrics,
            claims=functools.partial(self._require_dra().dynamic_resources, self.pods),
        )
        self._grpc = await serve_grpc(
            paths.pod_resources_socket,
            lambda server: pr_grpc.add_PodResourcesListerServicer_to_server(servicer, server),
        )
        api = StatusAPI(
            self._require_manager(),
            self._require_topology(),
            self.config.topology.scope,
            paths.checkpoint,
            self._require_dra().control,
            self._require_dra().manager,
            self.config.node_name,
            self.pods,
            lambda: self.bad_files,
            self.registry,
        )
        self._status = StatusServer(api.routes(), api.prefixes(), api.puts())
        try:
            await self._status.start(paths.status_socket, self.config.http_addr)
        except OSError as err:
            raise NodeStartError(str(err)) from None

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops.clear()
        if self._watcher is not None:
            await self._watcher.stop()
            self._watcher = None
        if self._sync is not None:
            await self._sync.stop()
        if self._dra is not None:
            # What reacts to slices and saves claims; the DRA manager stops last, after the servers.
            await self._dra.control.stop()
        if self._status is not None:
            await self._status.stop()
        if self._grpc is not None:
            await self._grpc.stop(0.5)
            self._grpc = None
        if self.manager is not None:
            await self.manager.stop()
        if self.dra is not None:
            await self.dra.stop()
        if self._sync is not None and self._state is not None:
            with contextlib.suppress(OSError):
                await self._state.save(self._sync.remembered_pods)
        for path in (self.paths.status_socket, self.paths.pod_resources_socket):
            with contextlib.suppress(OSError):
                path.unlink()

    async def _status_loop(self) -> None:
        manager = self._require_manager()
        while True:
            await asyncio.sleep(self.config.status_interval)
            # GetCapacity is what drops resources past their stop grace period; it logs them itself.
            manager.get_capacity()
