"""DeviceManager: the node side's one facade (the kubelet's `ManagerImpl`).

It owns the state and orchestrates the parts: registration, the endpoint lifecycle, capacity, the
allocator, topology hints, container start and the checkpoint. State is mutated on the event loop only,
between awaits; the only lock held across a plugin call is that plugin's own (its Allocate and
GetPreferredAllocation calls queue at its endpoint), so a hung plugin delays only its own requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import grpc.aio

from kubedevice.api import constants
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.checkpoint import CheckpointStore
from kubedevice.checkpoint.writer import CheckpointWriter
from kubedevice.grpc_unix import UnixBindError, serve_unix
from kubedevice.manager import capacity, resource_status
from kubedevice.manager.allocator import ActivePods, AffinityStore, Allocator, CallTimeouts
from kubedevice.manager.changes import ChangeListener
from kubedevice.manager.checkpoint_restore import restore_checkpoint
from kubedevice.manager.container_start import ContainerStart
from kubedevice.manager.endpoint_lifecycle import DialTimeouts, EndpointLifecycle
from kubedevice.manager.metrics import ManagerMetrics
from kubedevice.manager.plugin_dir import clean_plugin_dir, make_plugin_dir, plugin_dir_is_empty
from kubedevice.manager.plugin_handler import DevicePluginHandler, start_watching
from kubedevice.manager.registration import MAX_UNIX_SOCKET_PATH, RegistrationServicer
from kubedevice.manager.state import ManagerState
from kubedevice.manager.topology_hints import TopologyHints
from kubedevice.manager.types import (
    Container,
    DeviceHealth,
    Pod,
    ResourceStatus,
    RunContainerOptions,
    TopologyHint,
)
from kubedevice.pluginwatcher.handler import PluginHandler, WatcherOptions
from kubedevice.wording import counted

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubedevice.pluginwatcher.watcher import PluginWatcher

log = logging.getLogger(__name__)

#: kubelet.sock: owner and group only.
_SOCKET_MODE = 0o660


class DeviceManager:
    """The kubelet's device manager, over a device plugin directory.

    `plugin_dir` holds kubelet.sock, the plugin sockets and the checkpoint. `plugins_registry`, when
    given, is watched for probe-mode plugins. `active_pods` lets allocation and run options drop the
    allocations of pods that are gone, as the kubelet does; without it only explicit
    `update_allocated_devices` calls do. `affinity` is the topology manager's hint store, read when
    devices are picked; `numa_nodes` the machine's NUMA nodes, over which topology hints are made.
    `sources_ready` mirrors the kubelet's notion: while False, nothing is garbage-collected and
    restarted containers take the fast path. With `checkpoint_each_allocate` False, `allocate` does not
    wait for the checkpoint: the caller awaits `write_checkpoint()` before the container may start.
    """

    def __init__(
        self,
        plugin_dir: Path | str,
        *,
        stop_grace_period: float = constants.ENDPOINT_STOP_GRACE_PERIOD_S,
        checkpoint_name: str = constants.CHECKPOINT_NAME,
        plugins_registry: Path | str | None = None,
        registry: CollectorRegistry | None = None,
        dial_timeout: float = constants.DIAL_TIMEOUT_S,
        options_timeout: float = constants.DIAL_TIMEOUT_S,
        allocate_timeout: float = 30.0,
        preferred_allocation_timeout: float = 30.0,
        pre_start_timeout: float = constants.PRE_START_CONTAINER_TIMEOUT_S,
        get_info_timeout: float = constants.GET_INFO_TIMEOUT_S,
        notify_timeout: float = constants.NOTIFY_REGISTRATION_STATUS_TIMEOUT_S,
        watch_interval: float = 0.15,
        active_pods: ActivePods | None = None,
        affinity: AffinityStore | None = None,
        numa_nodes: Iterable[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        checkpoint_fault: Callable[[str], None] | None = None,
        checkpoint_each_allocate: bool = True,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.socket_path = self.plugin_dir / constants.KUBELET_SOCKET_NAME
        if len(str(self.socket_path.absolute()).encode()) > MAX_UNIX_SOCKET_PATH:
            raise ValueError(
                f"device plugin directory {self.plugin_dir} is too long: {self.socket_path} exceeds "
                f"the {MAX_UNIX_SOCKET_PATH}-byte unix socket path limit"
            )
        self.plugins_registry = Path(plugins_registry) if plugins_registry is not None else None
        self.stop_grace_period = stop_grace_period
        self.metrics = ManagerMetrics(registry)
        #: Why the checkpoint could not be read at start, if it could not.
        self.checkpoint_error: str | None = None
        #: Where the unreadable checkpoint was moved, if it was.
        self.quarantined_checkpoint: Path | None = None

        self._state = ManagerState(clock=clock)
        # `checkpoint_fault` is the store's test-only hook (crash-consistency tests), never configuration.
        self._store = CheckpointStore(self.plugin_dir, checkpoint_name, fault=checkpoint_fault)
        self._writer = CheckpointWriter(self._store, self._state.checkpoint_data)
        self._endpoints = EndpointLifecycle(
            self._state,
            DialTimeouts(dial_timeout, options_timeout),
            status=lambda: self._status,
            checkpoint_soon=self._writer.request,
        )
        self._allocator = Allocator(
            self._state,
            self._writer,
            self.metrics,
            CallTimeouts(allocate_timeout, preferred_allocation_timeout),
            active_pods=active_pods,
            affinity=affinity,
            checkpoint_each_allocate=checkpoint_each_allocate,
        )
        self._hints = TopologyHints(self._state, self._allocator, numa_nodes)
        #: Each resource's turn at its plugin, for callers that admit pods concurrently (see plugin_turns).
        self.plugin_turns = self._allocator.turns
        self._container_start = ContainerStart(self._state, self._allocator, pre_start_timeout)
        self._server: grpc.aio.Server | None = None
        # The plugin watcher is made once kubelet.sock is served: its imports are not start-up's cost.
        self._watcher_options = WatcherOptions(dial_timeout, get_info_timeout, notify_timeout, watch_interval)
        #: The `DevicePlugin` handler, for a caller's own plugins_registry watcher (`GetWatcherHandler`).
        self.plugin_handler: PluginHandler = DevicePluginHandler(self._endpoints)
        self._watcher: PluginWatcher | None = None
        self._status = "new"

    async def start(self, running_containers: Iterable[tuple[str, str]] = ()) -> None:
        """Read the checkpoint, clean stale sockets, then serve kubelet.sock (the kubelet's Start).

        `running_containers` are the (pod UID, container name) pairs the runtime reports running now;
        while `sources_ready` is False they keep their checkpointed devices without any check.
        """
        if self._status != "new":
            raise RuntimeError(f"device manager already {self._status}")
        self._status = "starting"
        self._allocator.startup_running = frozenset(running_containers)
        await asyncio.to_thread(make_plugin_dir, self.plugin_dir)
        leftovers = await asyncio.to_thread(self._store.remove_stale_temp_files)
        if leftovers:
            log.info("removed %s left by a crash", counted(len(leftovers), "temporary checkpoint file"))
        restored = await restore_checkpoint(self._state, self._store)
        self.checkpoint_error, self.quarantined_checkpoint = restored.error, restored.quarantined
        removed = await asyncio.to_thread(clean_plugin_dir, self.plugin_dir, self._store.path.name)
        if removed:
            log.info("removed %s from %s", counted(len(removed), "stale socket"), self.plugin_dir)
        registration = RegistrationServicer(self.plugin_dir, self._endpoints.connect_client, self.metrics)
        try:
            # gRPC creates the socket under the process umask; plugins run as root or the same group, and
            # nobody else may register (the directory's 0750 alone is no guarantee once it is shared).
            self._server = await serve_unix(
                self.socket_path.absolute(),
                lambda server: dp_grpc.add_RegistrationServicer_to_server(registration, server),
                mode=_SOCKET_MODE,
            )
        except UnixBindError as err:
            self._status = "stopped"
            raise RuntimeError(f"cannot serve {self.socket_path}: {err.reason}") from None
        self._status = "running"
        if self.plugins_registry is not None:
            self._watcher = start_watching(self.plugins_registry, self.plugin_handler, self._watcher_options)
        log.info("device manager serving %s", self.socket_path)

    async def stop(self, grace: float = 1.0) -> None:
        """Stop serving, disconnect every plugin and let the last checkpoint write finish. Idempotent."""
        if self._status in ("stopping", "stopped"):
            return
        self._status = "stopping"
        if self._watcher is not None:
            await self._watcher.stop()
        if self._server is not None:
            await self._server.stop(grace)
        await self._endpoints.stop()
        await self._writer.drain()
        self._status = "stopped"

    async def __aenter__(self) -> DeviceManager:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def sources_ready(self) -> bool:
        """While False: no garbage collection, and the startup running containers take the fast path."""
        return self._allocator.sources_ready

    @sources_ready.setter
    def sources_ready(self, ready: bool) -> None:
        self._allocator.sources_ready = ready

    async def allocate(self, pod: Pod, container: Container, *, already_running: bool = False) -> None:
        """Give `container` its devices (the kubelet's Allocate). Call for init containers first, in order.

        `already_running` says the container survived a restart of this manager and keeps its
        checkpointed devices without any check. Raises AdmissionError.
        """
        await self._allocator.allocate(pod, container, already_running=already_running)

    def update_allocated_devices(self, active_pod_uids: Iterable[str] | None = None) -> list[str]:
        """Drop the allocations of pods that are not active; returns the UIDs dropped."""
        return self._allocator.update_allocated_devices(active_pod_uids)

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint] | None]:
        """Per device-plugin resource of the container: None (no preference) or the hints."""
        return self._hints.get_topology_hints(pod, container)

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint] | None]:
        """The same for the whole pod (pod scope)."""
        return self._hints.get_pod_topology_hints(pod)

    def mark_running(self, containers: Iterable[tuple[str, str]]) -> None:
        """Containers found running after start keep their devices unchecked while sources aren't ready."""
        self._allocator.startup_running = self._allocator.startup_running | frozenset(containers)

    async def get_device_run_container_options(
        self, pod: Pod, container: Container, *, already_running: bool = False
    ) -> RunContainerOptions | None:
        """A starting container's run options (PreStartContainer first when the plugin asks for it)."""
        return await self._container_start.get_device_run_container_options(
            pod, container, already_running=already_running
        )

    def get_capacity(self) -> tuple[dict[str, int], dict[str, int], list[str]]:
        """(capacity, allocatable, deleted resources); drops resources past the stop grace period."""
        return capacity.get_capacity(self._state, self.stop_grace_period, self._writer.request)

    def get_allocatable_devices(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """resource -> healthy device ID -> its NUMA nodes (empty: no topology)."""
        return capacity.get_allocatable_devices(self._state)

    def allocated_device_counts(self) -> dict[str, int]:
        """resource -> devices held by containers; node allocatable never goes below these."""
        return capacity.allocated_device_counts(self._state)

    def resource_devices(self, resource: str) -> tuple[frozenset[str], frozenset[str]] | None:
        """(healthy, unhealthy) device IDs of a resource as the manager counts them; None if unknown."""
        return resource_status.resource_devices(self._state, resource)

    def device_topology(self, resource: str) -> dict[str, tuple[int, ...]]:
        """device ID -> NUMA nodes, for the devices of a resource that report topology (healthy or not)."""
        return resource_status.device_topology(self._state, resource)

    def get_devices(self, pod_uid: str, container_name: str) -> dict[str, dict[str, tuple[int, ...]]] | None:
        """resource -> device ID -> NUMA nodes of a container's devices; None if unknown (PodResources)."""
        return self._state.pod_devices.device_topology(pod_uid, container_name)

    async def should_reset_extended_resource_capacity(self) -> bool:
        """True when the plugin directory is empty (hidden names aside): the node looks new."""
        return await asyncio.to_thread(plugin_dir_is_empty, self.plugin_dir)

    def pod_uids(self) -> set[str]:
        """UIDs of the pods holding devices."""
        return self._state.pod_devices.pod_uids()

    def container_names(self, pod_uid: str) -> list[str]:
        return self._state.pod_devices.container_names(pod_uid)

    def registered_resources(self) -> list[ResourceStatus]:
        return resource_status.registered_resources(self._state)

    def allocated_resources_status(
        self, pod_uid: str, container_name: str
    ) -> dict[str, dict[str, DeviceHealth]]:
        """resource -> device ID -> health ("Unknown" without a running plugin), for a container's devices."""
        return resource_status.allocated_resources_status(self._state, pod_uid, container_name)

    @property
    def version(self) -> int:
        """Grows with every change (registration, snapshot, disconnect, deletion, allocation, release)."""
        return self._state.changes.version

    async def wait_for_change(self, after_version: int) -> int:
        return await self._state.changes.wait(after_version)

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        return self._state.changes.subscribe(listener)

    async def write_checkpoint(self) -> None:
        """Return once a checkpoint write that began after this call is on disk (group commit); raises
        AdmissionError with the writer's text when it cannot be written."""
        await self._allocator.write_checkpoint()
