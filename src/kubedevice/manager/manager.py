"""DeviceManager: the node side's one facade (SPEC §2-§8).

It serves the Registration service, keeps the endpoints of every plugin, turns their ListAndWatch
snapshots into capacity, hands devices to containers, builds their run options and checkpoints all of
it. State is mutated on the event loop only, between awaits; no lock is held across a plugin call, so a
hung plugin delays only the requests that wait on it (SPEC §11.10). Devices picked for an allocation are
reserved at once and re-checked after every await.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import grpc.aio
from prometheus_client import CollectorRegistry

from kubedevice.api.constants import (
    CHECKPOINT_NAME,
    DIAL_TIMEOUT_S,
    ENDPOINT_STOP_GRACE_PERIOD_S,
    GET_INFO_TIMEOUT_S,
    HEALTHY,
    KUBELET_SOCKET_NAME,
    NOTIFY_REGISTRATION_STATUS_TIMEOUT_S,
    PRE_START_CONTAINER_TIMEOUT_S,
    UNHEALTHY,
)
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.manager.allocator import FreeDevices, Picker, filter_by_affinity, generate_topology_hints
from kubedevice.manager.changes import ChangeFeed, ChangeListener
from kubedevice.manager.checkpoint import (
    CheckpointData,
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointStore,
    collector_paused,
)
from kubedevice.manager.checkpoint_writer import CheckpointWriteError, CheckpointWriter
from kubedevice.manager.devices import NO_TOPOLOGY, ResourceDevices, Snapshot
from kubedevice.manager.endpoint import Endpoint
from kubedevice.manager.errors import AdmissionError, PluginCallError, RegistrationError, RunOptionsError
from kubedevice.manager.metrics import ManagerMetrics
from kubedevice.manager.plugin_watcher import PluginWatcher, WatcherTimeouts
from kubedevice.manager.pod_devices import DevicesPerNuma, PodDevices
from kubedevice.manager.registration import MAX_UNIX_SOCKET_PATH, RegistrationServicer
from kubedevice.manager.run_options import merge_run_options
from kubedevice.manager.types import (
    Change,
    Container,
    DeviceHealth,
    Pod,
    ResourceStatus,
    RunContainerOptions,
    TopologyHint,
)

log = logging.getLogger(__name__)

#: (pod UID, container name) -> NUMA affinity chosen by a topology manager; None = no preference.
AffinityProvider = Callable[[str, str], frozenset[int] | None]
#: UIDs of the pods that are active now (the kubelet's activePods()).
ActivePods = Callable[[], Iterable[str]]


class DeviceManager:
    """The kubelet's device manager, over a device plugin directory.

    `plugin_dir` holds kubelet.sock, the plugin sockets and the checkpoint. `plugins_registry`, when
    given, is watched for probe-mode plugins. `active_pods` lets allocation and run options drop the
    allocations of pods that are gone, as the kubelet does; without it only explicit
    `update_allocated_devices` calls do. `sources_ready` mirrors the kubelet's notion: while False,
    nothing is garbage-collected and restarted containers take the fast path.
    """

    def __init__(
        self,
        plugin_dir: Path | str,
        *,
        stop_grace_period: float = ENDPOINT_STOP_GRACE_PERIOD_S,
        checkpoint_name: str = CHECKPOINT_NAME,
        plugins_registry: Path | str | None = None,
        registry: CollectorRegistry | None = None,
        dial_timeout: float = DIAL_TIMEOUT_S,
        options_timeout: float = DIAL_TIMEOUT_S,
        allocate_timeout: float = 30.0,
        preferred_allocation_timeout: float = 30.0,
        pre_start_timeout: float = PRE_START_CONTAINER_TIMEOUT_S,
        get_info_timeout: float = GET_INFO_TIMEOUT_S,
        notify_timeout: float = NOTIFY_REGISTRATION_STATUS_TIMEOUT_S,
        watch_interval: float = 0.15,
        active_pods: ActivePods | None = None,
        affinity: AffinityProvider | None = None,
        numa_nodes: Iterable[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        checkpoint_fault: Callable[[str], None] | None = None,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.socket_path = self.plugin_dir / KUBELET_SOCKET_NAME
        if len(str(self.socket_path.absolute()).encode()) > MAX_UNIX_SOCKET_PATH:
            raise ValueError(
                f"device plugin directory {self.plugin_dir} is too long: {self.socket_path} exceeds "
                f"the {MAX_UNIX_SOCKET_PATH}-byte unix socket path limit"
            )
        self.plugins_registry = Path(plugins_registry) if plugins_registry is not None else None
        self.stop_grace_period = stop_grace_period
        self.metrics = ManagerMetrics(registry)
        #: While False: no garbage collection, and the startup running containers take the fast path.
        self.sources_ready = True
        #: Why the checkpoint could not be read at start, if it could not.
        self.checkpoint_error: str | None = None
        #: Where the unreadable checkpoint was moved, if it was.
        self.quarantined_checkpoint: Path | None = None

        # `checkpoint_fault` is the store's test-only hook (crash-consistency tests), never configuration.
        self._store = CheckpointStore(self.plugin_dir, checkpoint_name, fault=checkpoint_fault)
        self._writer = CheckpointWriter(self._store, self._checkpoint_data)
        self._dial_timeout = dial_timeout
        self._options_timeout = options_timeout
        self._allocate_timeout = allocate_timeout
        self._preferred_timeout = preferred_allocation_timeout
        self._pre_start_timeout = pre_start_timeout
        self._watcher_timeouts = WatcherTimeouts(dial_timeout, get_info_timeout, notify_timeout)
        self._watch_interval = watch_interval
        self._active_pods = active_pods
        self._affinity = affinity
        self._numa_nodes = sorted(set(numa_nodes)) if numa_nodes is not None else None
        self._clock = clock

        #: resource -> the primary endpoint (last connected; may be stopped).
        self._endpoints: dict[str, Endpoint] = {}
        #: resource -> socket path -> live endpoint, in connection order (era C's endpointStore).
        self._endpoint_store: dict[str, dict[str, Endpoint]] = {}
        self._streams: dict[Endpoint, asyncio.Task[None]] = {}
        #: resource -> devices; a key here is the kubelet's "healthyDevices has r".
        self._devices: dict[str, ResourceDevices] = {}
        self._warnings: dict[str, str] = {}
        self._pod_devices = PodDevices()
        #: resource -> devices recorded in _pod_devices (the kubelet's allocatedDevices).
        self._allocated: dict[str, set[str]] = {}
        #: resource -> devices picked by allocations still waiting on a plugin.
        self._in_flight: dict[str, set[str]] = {}
        #: resource -> healthy devices neither allocated nor in flight. Picks and failed allocations keep
        #: it up to date; anything else that changes the devices or the allocations drops it, and the
        #: next admission rebuilds it (rebuilding 10^4 IDs per admission made admission O(devices)).
        self._free: dict[str, FreeDevices] = {}
        #: The checkpoint's registered devices, reused by every write until the devices change: the
        #: checkpoint encoder recognises the same object and neither compares nor copies its lists.
        self._registered: dict[str, list[str]] | None = None
        #: pod UID -> resource -> devices later containers of the pod may reuse (SPEC §5.1).
        self._reuse: dict[str, dict[str, set[str]]] = {}
        #: pod UID -> its admission in progress (serialises the pod's containers).
        self._admitting: dict[str, _Admission] = {}
        self._startup_running: frozenset[tuple[str, str]] = frozenset()

        self._changes = ChangeFeed()
        self._server: grpc.aio.Server | None = None
        self._watcher: PluginWatcher | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._state = "new"

    # ------------------------------------------------------------------------------------------------
    # Lifecycle

    async def start(self, running_containers: Iterable[tuple[str, str]] = ()) -> None:
        """Read the checkpoint, clean stale sockets, then serve kubelet.sock (SPEC §8.1).

        `running_containers` are the (pod UID, container name) pairs the runtime reports running now;
        while `sources_ready` is False they keep their checkpointed devices without any check.
        """
        if self._state != "new":
            raise RuntimeError(f"device manager already {self._state}")
        self._state = "starting"
        self._startup_running = frozenset(running_containers)
        await asyncio.to_thread(_make_plugin_dir, self.plugin_dir)
        leftovers = await asyncio.to_thread(self._store.remove_stale_temp_files)
        if leftovers:
            log.info("removed %d temporary checkpoint file(s) left by a crash", len(leftovers))
        await self._read_checkpoint()
        removed = await asyncio.to_thread(_clean_plugin_dir, self.plugin_dir, self._store.path.name)
        if removed:
            log.info("removed %d stale socket(s) from %s", len(removed), self.plugin_dir)
        server = grpc.aio.server()
        dp_grpc.add_RegistrationServicer_to_server(
            RegistrationServicer(self.plugin_dir, self._connect_client, self.metrics), server
        )
        try:
            server.add_insecure_port("unix://" + str(self.socket_path.absolute()))
        except RuntimeError as err:
            self._state = "stopped"
            raise RuntimeError(f"cannot serve {self.socket_path}: {err}") from None
        self._server = server
        self._state = "running"
        await server.start()
        # gRPC creates the socket under the process umask; plugins run as root or the same group, and
        # nobody else may register (the directory's 0750 alone is no guarantee once it is shared).
        await asyncio.to_thread(os.chmod, self.socket_path, _SOCKET_MODE)
        if self.plugins_registry is not None:
            self._watcher = PluginWatcher(
                self.plugins_registry,
                self._connect_client,
                self._disconnect_client,
                timeouts=self._watcher_timeouts,
                interval=self._watch_interval,
            )
            self._watcher.start()
        log.info("device manager serving %s", self.socket_path)

    async def stop(self, grace: float = 1.0) -> None:
        """Stop serving, disconnect every plugin and let the last checkpoint write finish. Idempotent."""
        if self._state in ("stopping", "stopped"):
            return
        self._state = "stopping"
        if self._watcher is not None:
            await self._watcher.stop()
        if self._server is not None:
            await self._server.stop(grace)
        for resource in list(self._endpoint_store):
            for endpoint in list(self._endpoint_store.get(resource, {}).values()):
                await self._endpoint_ended(endpoint, "device manager stopped")
        streams = list(self._streams.values())
        await asyncio.gather(*streams, return_exceptions=True)
        background = list(self._background)
        await asyncio.gather(*background, return_exceptions=True)
        await self._writer.drain()
        self._state = "stopped"

    async def __aenter__(self) -> DeviceManager:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _read_checkpoint(self) -> None:
        try:
            decoded = await asyncio.to_thread(self._store.read)
        except CheckpointNotFoundError:
            log.info("no checkpoint at %s: starting empty", self._store.path)
            return
        except (CheckpointError, OSError) as err:
            self.checkpoint_error = str(err)
            log.error(
                "Continue after failing to read checkpoint file %s. Device allocation info may NOT be "
                "up-to-date: %s",
                self._store.path,
                err,
            )
            try:
                self.quarantined_checkpoint = await asyncio.to_thread(self._store.quarantine)
                log.error("the unreadable checkpoint was moved to %s", self.quarantined_checkpoint)
            except CheckpointError as qerr:
                log.error("%s", qerr)
            return
        data = decoded.data
        with collector_paused():
            self._pod_devices = PodDevices.from_checkpoint(data.pod_device_entries or [])
            self._allocated = self._pod_devices.devices()
        now = self._clock()
        for resource in data.registered_devices or {}:
            self._devices[resource] = ResourceDevices()
            self._endpoints[resource] = Endpoint.stopped(resource, now)
        self._devices_changed()

    # ------------------------------------------------------------------------------------------------
    # Endpoints

    async def _connect_client(self, resource: str, socket_path: str) -> None:
        """Dial a plugin, record it as the primary endpoint of `resource`, start its ListAndWatch."""
        if self._state != "running" and self._state != "starting":
            raise RegistrationError("device manager is not running")
        try:
            endpoint = await Endpoint.connect(
                resource, socket_path, dial_timeout=self._dial_timeout, options_timeout=self._options_timeout
            )
        except PluginCallError as err:
            raise RegistrationError(str(err)) from None
        if self._state != "running":
            await endpoint.close()
            raise RegistrationError("device manager is stopping")
        siblings = self._endpoint_store.setdefault(resource, {})
        # A plugin that registers again on the same socket is a new instance (it restarted); the old
        # connection is dropped without touching health, so its late stream end cannot evict this one.
        replaced = siblings.pop(socket_path, None)
        siblings[socket_path] = endpoint
        self._endpoints[resource] = endpoint
        task = asyncio.create_task(self._follow(endpoint), name=f"ListAndWatch {resource} {socket_path}")
        self._streams[endpoint] = task
        log.info("registered device plugin for %s at %s", resource, socket_path)
        self._changes.publish(Change("registered", resource))
        if replaced is not None:
            await replaced.close()

    async def _disconnect_client(self, resource: str, socket_path: str) -> None:
        endpoint = self._endpoint_store.get(resource, {}).get(socket_path)
        if endpoint is not None:
            await self._endpoint_ended(endpoint, "plugin deregistered")

    async def _follow(self, endpoint: Endpoint) -> None:
        try:
            try:
                reason = await endpoint.list_and_watch(self._on_snapshot)
            except Exception as err:
                # A bug in handling one message must not leave a half-dead endpoint behind.
                log.exception("handling ListAndWatch of %s failed", endpoint.resource_name)
                reason = f"internal error: {err}"
            log.warning(
                "ListAndWatch ended unexpectedly for device plugin %s at %s: %s",
                endpoint.resource_name,
                endpoint.socket_path,
                reason,
            )
            await self._endpoint_ended(endpoint, reason)
        finally:
            self._streams.pop(endpoint, None)

    async def _endpoint_ended(self, endpoint: Endpoint, reason: str) -> None:
        """Era C's PluginDisconnected: only the endpoint still tracked for its socket path counts."""
        resource = endpoint.resource_name
        siblings = self._endpoint_store.get(resource)
        if siblings is None or siblings.get(endpoint.socket_path) is not endpoint:
            await endpoint.close()
            return
        del siblings[endpoint.socket_path]
        endpoint.set_stop_time(self._clock())
        if siblings:
            # The most recently connected survivor becomes primary; health is untouched.
            self._endpoints[resource] = list(siblings.values())[-1]
        else:
            del self._endpoint_store[resource]
            self._endpoints[resource] = endpoint
            devices = self._devices.get(resource)
            if devices is not None:
                devices.mark_unhealthy()
                self._devices_changed()
            log.info("device plugin for %s disconnected (%s): its devices are unhealthy", resource, reason)
        await endpoint.close()
        self._changes.publish(Change("disconnected", resource))

    async def _on_snapshot(self, endpoint: Endpoint, msg: Snapshot) -> None:
        resource = endpoint.resource_name
        if self._endpoint_store.get(resource, {}).get(endpoint.socket_path) is not endpoint:
            return  # a replaced connection's last words
        devices = self._devices.get(resource)
        if devices is None:
            devices = self._devices[resource] = ResourceDevices()
        before = self._health_of_allocated(resource, devices)
        try:
            report = devices.apply(msg)
        finally:
            self._devices_changed()  # even a message that failed to decode may have changed some
        warning = report.warning(resource)
        if warning is not None:
            log.warning("%s", warning)
            self._warnings[resource] = warning
        else:
            self._warnings.pop(resource, None)
        after = self._health_of_allocated(resource, devices)
        changed_pods = {pod for pod, health in after.items() if before.get(pod) != health}
        self._changes.publish(Change("devices", resource, tuple(sorted(changed_pods))))
        # Not awaited: the stream goes on while the write runs, and a burst of snapshots folds into
        # one or two writes of the latest state (a failure is only logged, as in the kubelet).
        self._track(self._writer.request())

    def _health_of_allocated(
        self, resource: str, devices: ResourceDevices
    ) -> dict[str, frozenset[tuple[str, str]]]:
        """pod UID -> (device, health) of its devices of `resource`; O(allocated), not O(devices)."""
        out: dict[str, frozenset[tuple[str, str]]] = {}
        if not self._allocated.get(resource):
            return out
        for pod_uid, _container, res, entry in self._pod_devices.entries():
            if res != resource:
                continue
            pairs = {(d, devices.device_health(d) or "") for d in entry.device_ids()}
            out[pod_uid] = out.get(pod_uid, frozenset()) | pairs
        return out

    # ------------------------------------------------------------------------------------------------
    # Queries

    def _is_device_plugin_resource(self, resource: str) -> bool:
        return resource in self._devices or resource in self._allocated

    def get_capacity(self) -> tuple[dict[str, int], dict[str, int], list[str]]:
        """(capacity, allocatable, deleted resources); drops resources past the grace period (SPEC §4.2)."""
        now = self._clock()
        capacity: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        deleted: list[str] = []
        for resource, devices in self._devices.items():
            endpoint = self._endpoints.get(resource)
            if endpoint is None or endpoint.grace_period_expired(now, self.stop_grace_period):
                deleted.append(resource)
                continue
            capacity[resource] = devices.capacity
            allocatable[resource] = len(devices.healthy)
        for resource in deleted:
            del self._devices[resource]
            self._endpoints.pop(resource, None)
            self._warnings.pop(resource, None)
        if deleted:
            self._devices_changed()
        if deleted:
            log.info("resources past their stop grace period were removed: %s", ", ".join(deleted))
            for resource in deleted:
                self._changes.publish(Change("deleted", resource))
            self._track(self._writer.request())
        return capacity, allocatable, deleted

    def get_allocatable_devices(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """resource -> healthy device ID -> its NUMA nodes (empty: no topology) (SPEC §4.3)."""
        out: dict[str, dict[str, tuple[int, ...]]] = {}
        for resource, devices in self._devices.items():
            if not devices.reported:
                continue
            topology = devices.topology
            out[resource] = {d: topology.get(d, ()) for d in devices.healthy}
        return out

    def resource_devices(self, resource: str) -> tuple[frozenset[str], frozenset[str]] | None:
        """(healthy, unhealthy) device IDs of a resource as the manager counts them; None if unknown."""
        devices = self._devices.get(resource)
        if devices is None:
            return None
        return frozenset(devices.healthy), frozenset(devices.unhealthy)

    def device_topology(self, resource: str) -> dict[str, tuple[int, ...]]:
        """device ID -> NUMA nodes, for the devices of a resource that report topology (healthy or not)."""
        devices = self._devices.get(resource)
        return dict(devices.topology) if devices is not None else {}

    def get_devices(self, pod_uid: str, container_name: str) -> dict[str, dict[str, tuple[int, ...]]] | None:
        """resource -> device ID -> NUMA nodes of a container's devices; None if unknown (SPEC §4.6)."""
        return self._pod_devices.device_topology(pod_uid, container_name)

    def allocated_device_counts(self) -> dict[str, int]:
        """resource -> devices held by containers; node allocatable never goes below these (SPEC §4.5)."""
        return {r: len(ids) for r, ids in self._allocated.items()}

    async def should_reset_extended_resource_capacity(self) -> bool:
        """True when the plugin directory is empty (hidden names aside): the node looks new (SPEC §4.7)."""

        def empty() -> bool:
            try:
                return not any(not e.name.startswith(".") for e in os.scandir(self.plugin_dir))
            except OSError:
                return False

        return await asyncio.to_thread(empty)

    def pod_uids(self) -> set[str]:
        """UIDs of the pods holding devices."""
        return self._pod_devices.pod_uids()

    def container_names(self, pod_uid: str) -> list[str]:
        return self._pod_devices.container_names(pod_uid)

    def registered_resources(self) -> list[ResourceStatus]:
        now = self._clock()
        out: list[ResourceStatus] = []
        for resource in sorted(set(self._endpoints) | set(self._devices)):
            primary = self._endpoints.get(resource)
            live = list(self._endpoint_store.get(resource, {}).values())
            live.sort(key=lambda e: e is not primary)
            devices = self._devices.get(resource, ResourceDevices())
            stopped = primary is None or primary.is_stopped
            stop_time = primary.stop_time if primary is not None else None
            options = primary.options if primary is not None else None
            out.append(
                ResourceStatus(
                    resource_name=resource,
                    state="stopped" if stopped else "running",
                    stopped_seconds=(now - stop_time) if stopped and stop_time is not None else None,
                    endpoints=[e.socket_path for e in live],
                    healthy=len(devices.healthy),
                    unhealthy=len(devices.unhealthy),
                    allocated=len(self._allocated.get(resource, ())),
                    pre_start_required=bool(options and options.pre_start_required),
                    get_preferred_allocation_available=bool(
                        options and options.get_preferred_allocation_available
                    ),
                    last_warning=self._warnings.get(resource),
                )
            )
        return out

    def allocated_resources_status(
        self, pod_uid: str, container_name: str
    ) -> dict[str, dict[str, DeviceHealth]]:
        """resource -> device ID -> health, for a container's devices (SPEC §4.7).

        "Unknown" when the resource has no running plugin or the plugin stopped reporting the device,
        where the kubelet would still say "Healthy".
        """
        resources = self._pod_devices.container_resources(pod_uid, container_name) or {}
        out: dict[str, dict[str, DeviceHealth]] = {}
        for resource, entry in sorted(resources.items()):
            endpoint = self._endpoints.get(resource)
            devices = self._devices.get(resource)
            health: dict[str, DeviceHealth] = {}
            for d in sorted(entry.device_ids()):
                reported = (
                    devices.device_health(d)
                    if devices is not None and endpoint is not None and not endpoint.is_stopped
                    else None
                )
                health[d] = (
                    HEALTHY if reported == HEALTHY else UNHEALTHY if reported is not None else "Unknown"
                )
            out[resource] = health
        return out

    # ------------------------------------------------------------------------------------------------
    # Changes

    @property
    def version(self) -> int:
        """Grows with every change (registration, snapshot, disconnect, deletion, allocation, release)."""
        return self._changes.version

    async def wait_for_change(self, after_version: int) -> int:
        return await self._changes.wait(after_version)

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        return self._changes.subscribe(listener)

    # ------------------------------------------------------------------------------------------------
    # Garbage collection

    def update_allocated_devices(self, active_pod_uids: Iterable[str] | None = None) -> list[str]:
        """Drop the allocations of pods that are not active (SPEC §4.4); returns the UIDs dropped.

        Without `active_pod_uids` the `active_pods` callback is asked; with neither nothing happens.
        Nothing happens either while `sources_ready` is False.
        """
        if active_pod_uids is None:
            if self._active_pods is None:
                return []
            active_pod_uids = self._active_pods()
        active = set(active_pod_uids)
        if not self.sources_ready:
            return []
        # A pod whose admission is under way is active whatever the caller's list says.
        active.update(self._admitting)
        to_remove = self._pod_devices.pod_uids() - active
        if not to_remove:
            return []
        self._pod_devices.delete(to_remove)
        self._allocated = self._pod_devices.devices()
        self._free.clear()
        for uid in to_remove:
            self._reuse.pop(uid, None)
        removed = sorted(to_remove)
        self._changes.publish(Change("released", None, tuple(removed)))
        return removed

    # ------------------------------------------------------------------------------------------------
    # Allocation

    async def allocate(self, pod: Pod, container: Container, *, already_running: bool = False) -> None:
        """Give `container` its devices (SPEC §5.1). Call for init containers first, in order.

        `already_running` says the container survived a restart of this manager and keeps its
        checkpointed devices without any check (SPEC §8.1 step 5). Raises AdmissionError.
        """
        for resource, quantity in container.limits.items():
            if quantity < 0:
                raise AdmissionError(
                    f'container "{container.name}" of pod "{pod.uid}" requests a negative quantity '
                    f"{quantity} of {resource}"
                )
        # Containers of one pod are admitted one at a time, in the caller's order, as the kubelet does;
        # different pods proceed concurrently.
        admission = self._admitting.setdefault(pod.uid, _Admission())
        admission.users += 1
        try:
            async with admission.lock:
                await self._admit_container(pod, container, already_running)
        finally:
            admission.users -= 1
            if not admission.users:
                del self._admitting[pod.uid]

    async def _admit_container(self, pod: Pod, container: Container, already_running: bool) -> None:
        # Keep only the pods being admitted in the reuse pool, as the kubelet keeps only the current one.
        for uid in list(self._reuse):
            if uid != pod.uid and uid not in self._admitting:
                del self._reuse[uid]
        reuse = self._reuse.setdefault(pod.uid, {})
        await self._allocate_container_resources(pod, container, reuse, already_running)
        held = self._pod_devices.container_resources(pod.uid, container.name) or {}
        if pod.is_init_container(container.name) and not pod.is_restartable_init_container(container.name):
            for resource, entry in held.items():
                reuse.setdefault(resource, set()).update(entry.device_ids())
        else:
            for resource, entry in held.items():
                if resource in reuse:
                    reuse[resource] -= entry.device_ids()

    async def _allocate_container_resources(
        self, pod: Pod, container: Container, reuse: dict[str, set[str]], already_running: bool
    ) -> None:
        needs_checkpoint = False
        gc_done = False
        for resource in sorted(container.limits):
            required = container.limits[resource]
            if not self._is_device_plugin_resource(resource):
                continue
            if not gc_done:
                self.update_allocated_devices()
                gc_done = True
            picker = await self._devices_to_allocate(
                pod, container, resource, required, reuse.get(resource, set()), already_running
            )
            if picker is None:
                continue
            try:
                resp = await self._call_allocate(resource, picker.picked)
                devices = self._devices.get(resource) or ResourceDevices()
                per_numa: DevicesPerNuma = {}
                for d in sorted(picker.picked):
                    for n in devices.numa_nodes_of(d) or (NO_TOPOLOGY,):
                        per_numa.setdefault(n, []).append(d)
                self._pod_devices.insert(pod.uid, container.name, resource, per_numa, resp)
                self._allocated.setdefault(resource, set()).update(picker.picked)
            finally:
                self._release(resource, picker)
            needs_checkpoint = True
            self._changes.publish(Change("allocated", resource, (pod.uid,)))
        if needs_checkpoint:
            try:
                await self._writer.write()
            except CheckpointWriteError as err:
                raise AdmissionError(str(err)) from None

    async def _call_allocate(self, resource: str, picked: set[str]) -> dp.ContainerAllocateResponse:
        endpoint = self._endpoints.get(resource)
        if endpoint is None:
            raise AdmissionError(f"unknown Device Plugin {resource}")
        started = time.perf_counter()
        try:
            resp = await endpoint.allocate(sorted(picked), self._allocate_timeout)
        except PluginCallError as err:
            raise AdmissionError(
                f"device plugin Allocate rpc for {resource} failed with err: {err}"
            ) from None
        finally:
            self.metrics.alloc_duration_seconds.labels(resource_name=resource).observe(
                time.perf_counter() - started
            )
        if not resp.container_responses:
            raise AdmissionError(f"no containers return in allocation response {_proto_text(resp)}")
        if len(resp.container_responses) > 1:
            log.warning(
                "device plugin for %s returned %d container responses to one request; using the first",
                resource,
                len(resp.container_responses),
            )
        return resp.container_responses[0]

    async def _devices_to_allocate(
        self,
        pod: Pod,
        container: Container,
        resource: str,
        required: int,
        reusable: set[str],
        already_running: bool,
    ) -> Picker | None:
        """The kubelet's devicesToAllocate (SPEC §5.3); the returned picker's devices are reserved."""
        needed = required
        pre = self._pod_devices.container_devices(pod.uid, container.name, resource)
        if pre is not None:
            needed -= len(pre)
            if needed != 0:
                raise AdmissionError(
                    f'pod "{pod.uid}" container "{container.name}" changed request for resource "{resource}" '
                    f"from {len(pre)} to {required}"
                )
        if already_running or (not self.sources_ready and (pod.uid, container.name) in self._startup_running):
            return None
        self._check_healthy(resource, pre)
        if needed == 0:
            return None
        picker = Picker(needed, self._in_flight.setdefault(resource, set()), self._free, resource)
        try:
            if picker.take(reusable):
                return picker
            available = self._available(resource)
            if len(available) < picker.needed:
                raise AdmissionError(
                    f"requested number of devices unavailable for {resource}. Requested: {picker.needed}, "
                    f"Available: {len(available)}"
                )
            affinity = self._affinity_of(pod, container)
            aligned, unaligned, no_affinity = filter_by_affinity(available, self._devices[resource], affinity)
            if picker.needed < len(aligned):
                preferred = await self._preferred_allocation(
                    resource, aligned | picker.picked, picker.picked, required
                )
                aligned, _, _ = self._revalidate(resource, pod, container, affinity)
                if picker.take(preferred & aligned if preferred else None) or picker.take(aligned):
                    return picker
            else:
                if picker.take(aligned):
                    return picker
                preferred = None
                if self._asks_preferred(resource):
                    preferred = await self._preferred_allocation(
                        resource, available | picker.picked, picker.picked, required
                    )
                    aligned, unaligned, no_affinity = self._revalidate(resource, pod, container, affinity)
                # Without a plugin call nothing was awaited, so the candidates are still current.
                if (
                    picker.take(preferred & (aligned | unaligned | no_affinity) if preferred else None)
                    or picker.take(aligned)
                    or picker.take(unaligned)
                    or picker.take(no_affinity)
                ):
                    return picker
            raise AdmissionError(
                f"unexpectedly allocated less resources than required. Requested: {required}, "
                f"Got: {required - picker.needed}"
            )
        except BaseException:
            self._release(resource, picker)
            raise

    def _check_healthy(self, resource: str, pre: set[str] | None) -> None:
        devices = self._devices.get(resource)
        if devices is None:
            raise AdmissionError(f"cannot allocate unregistered device {resource}")
        if not devices.healthy:
            raise AdmissionError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        if pre and not pre <= devices.healthy:
            raise AdmissionError(
                "previously allocated devices are no longer healthy; "
                f"cannot allocate unhealthy devices {resource}"
            )

    def _available(self, resource: str) -> set[str]:
        """The free devices of `resource`: the manager's own set, which callers must only read."""
        free = self._free.get(resource)
        if free is None:
            devices = self._devices[resource]
            free = self._free[resource] = FreeDevices(
                devices.healthy - self._allocated.get(resource, set()) - self._in_flight.get(resource, set())
            )
        return free

    def _release(self, resource: str, picker: Picker) -> None:
        """End a pick: its devices leave the in-flight set; those not allocated are free again."""
        picker.release()
        free = self._free.get(resource)
        devices = self._devices.get(resource)
        if free is None or devices is None:
            self._free.pop(resource, None)
            return
        allocated = self._allocated.get(resource, set())
        free.give_back([d for d in picker.picked if d in devices.healthy and d not in allocated])

    def _devices_changed(self) -> None:
        """Some resource's devices changed: the free sets and the registered devices are rebuilt."""
        self._free.clear()
        self._registered = None

    def _revalidate(
        self, resource: str, pod: Pod, container: Container, affinity: frozenset[int] | None
    ) -> tuple[set[str], set[str], set[str]]:
        """After awaiting a plugin: the candidates as they are now (others may have allocated meanwhile)."""
        if resource not in self._devices:
            raise AdmissionError(f"cannot allocate unregistered device {resource}")
        return filter_by_affinity(self._available(resource), self._devices[resource], affinity)

    def _affinity_of(self, pod: Pod, container: Container) -> frozenset[int] | None:
        if container.numa_affinity is not None:
            return container.numa_affinity
        if self._affinity is not None:
            return self._affinity(pod.uid, container.name)
        return None

    def _asks_preferred(self, resource: str) -> bool:
        """Whether allocation must go through `_preferred_allocation` (which also reports a lost endpoint)."""
        endpoint = self._endpoints.get(resource)
        return endpoint is None or (
            endpoint.options is not None and endpoint.options.get_preferred_allocation_available
        )

    async def _preferred_allocation(
        self, resource: str, available: set[str], must_include: set[str], size: int
    ) -> set[str] | None:
        endpoint = self._endpoints.get(resource)
        if endpoint is None:
            raise AdmissionError(f"endpoint not found in cache for a registered resource: {resource}")
        if endpoint.options is None or not endpoint.options.get_preferred_allocation_available:
            return None
        try:
            resp = await endpoint.get_preferred_allocation(
                sorted(available), sorted(must_include), size, self._preferred_timeout
            )
        except PluginCallError as err:
            raise AdmissionError(
                f"device plugin GetPreferredAllocation rpc for {resource} failed with err: {err}"
            ) from None
        if not resp.container_responses:
            return set()
        return set(resp.container_responses[0].deviceIDs)

    # ------------------------------------------------------------------------------------------------
    # Topology hints

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint] | None]:
        """Per device-plugin resource of the container: None (no preference) or the hints (SPEC §5.5)."""
        self.update_allocated_devices()
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource in sorted(container.limits):
            requested = container.limits[resource]
            if not self._is_device_plugin_resource(resource):
                continue
            devices = self._devices.get(resource)
            if devices is None or not devices.has_topology:
                hints[resource] = None
                continue
            allocated = self._pod_devices.container_devices(pod.uid, container.name, resource)
            if allocated:
                if len(allocated) != requested:
                    hints[resource] = []
                else:
                    hints[resource] = generate_topology_hints(
                        self._numa_nodes_for(devices), devices, allocated, set(), requested
                    )
                continue
            available = self._available(resource)
            reusable = self._reuse.get(pod.uid, {}).get(resource, set())
            if len(available | reusable) < requested:
                hints[resource] = []
                continue
            hints[resource] = generate_topology_hints(
                self._numa_nodes_for(devices), devices, available, reusable, requested
            )
        return hints

    def _numa_nodes_for(self, devices: ResourceDevices) -> list[int]:
        if self._numa_nodes is not None:
            return self._numa_nodes
        nodes: set[int] = set()
        for resource_devices in self._devices.values():
            for node_ids in resource_devices.topology.values():
                nodes.update(node_ids)
        return sorted(nodes)

    # ------------------------------------------------------------------------------------------------
    # Container start

    async def get_device_run_container_options(
        self, pod: Pod, container: Container
    ) -> RunContainerOptions | None:
        """The run options of a starting container (SPEC §6.1); PreStartContainer first when asked for.

        Raises RunOptionsError (the container cannot start) or AdmissionError (re-allocation failed).
        """
        needs_reallocate = False
        active = set(self._active_pods()) if self._active_pods is not None else None
        for resource in sorted(container.limits):
            if not self._is_device_plugin_resource(resource) or container.limits[resource] == 0:
                continue
            await self._pre_start_if_needed(pod.uid, container.name, resource)
            if active is not None and pod.uid not in active:
                continue
            if self._pod_devices.container_devices(pod.uid, container.name, resource) is None:
                needs_reallocate = True
        if needs_reallocate:
            await self.allocate(pod, container)
        resources = self._pod_devices.container_resources(pod.uid, container.name)
        if resources is None:
            return None
        return merge_run_options((r, resources[r].alloc_resp) for r in sorted(resources))

    async def _pre_start_if_needed(self, pod_uid: str, container_name: str, resource: str) -> None:
        endpoint = self._endpoints.get(resource)
        if endpoint is None:
            raise RunOptionsError(f"endpoint not found in cache for a registered resource: {resource}")
        if endpoint.options is None or not endpoint.options.pre_start_required:
            return
        devices = self._pod_devices.container_devices(pod_uid, container_name, resource)
        if devices is None:
            raise RunOptionsError(
                f"no devices found allocated in local cache for pod {pod_uid}, container {container_name}, "
                f"resource {resource}"
            )
        try:
            await endpoint.pre_start_container(sorted(devices), self._pre_start_timeout)
        except PluginCallError as err:
            raise RunOptionsError(
                f"device plugin PreStartContainer rpc for {resource} failed with err: {err}"
            ) from None

    # ------------------------------------------------------------------------------------------------
    # Checkpoint

    def _checkpoint_data(self) -> CheckpointData:
        entries = self._pod_devices.to_checkpoint()
        if self._registered is None:
            self._registered = {r: list(d.healthy) for r, d in self._devices.items()}
        return CheckpointData(pod_device_entries=entries or None, registered_devices=self._registered)

    async def write_checkpoint(self) -> None:
        """Write the checkpoint now (it is also written on every change that needs it)."""
        await self._writer.write()

    def _track(self, task: asyncio.Task[None]) -> None:
        self._background.add(task)
        task.add_done_callback(self._background.discard)


@dataclass(slots=True)
class _Admission:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def _proto_text(msg: dp.AllocateResponse) -> str:
    return "{" + str(msg).replace("\n", " ").strip() + "}"


#: kubelet.sock: owner and group only.
_SOCKET_MODE = 0o660


def _make_plugin_dir(directory: Path) -> None:
    if not directory.is_dir():
        directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        # mkdir's mode is filtered by the umask; the kubelet's directory is exactly 0750.
        os.chmod(directory, 0o750)


def _clean_plugin_dir(directory: Path, checkpoint_name: str) -> list[str]:
    """Remove stale unix sockets; the checkpoint, directories and other files stay (SPEC §8.1)."""
    removed: list[str] = []
    errors: list[str] = []
    for entry in os.scandir(directory):
        if entry.name == checkpoint_name:
            continue
        try:
            if not stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                continue
            os.unlink(entry.path)
            removed.append(entry.name)
        except FileNotFoundError:
            continue
        except OSError as err:
            errors.append(f"{entry.path}: {err.strerror or err}")
    if errors:
        raise OSError(f"cannot clean the device plugin directory {directory}: " + "; ".join(errors))
    return removed
