"""Allocation: which devices a container gets, and recording them (the kubelet's Allocate path).

`Allocator.allocate` is the kubelet's `Allocate` / `allocateContainerResources`: per device-plugin resource,
`devicesToAllocate` (reuse, health checks, `filterByAffinity`, the plugin's preferred allocation, a re-check
of the candidates after that call), the plugin's Allocate, the pod devices and a checkpoint write (or, for the
node daemon, `write_checkpoint` later). `update_allocated_devices` is the kubelet's garbage collection of gone
pods. Picked devices are reserved at once and re-checked after every await: concurrent admissions never hand
out a device twice, and a hung plugin delays only the requests that wait on it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint.writer import CheckpointWriteError, CheckpointWriter
from kubedevice.manager.devices import NO_TOPOLOGY, ResourceDevices
from kubedevice.manager.errors import AdmissionError, PluginCallError
from kubedevice.manager.free_devices import FreeDevices, Picker, filter_by_affinity
from kubedevice.manager.metrics import ManagerMetrics
from kubedevice.manager.plugin_turns import PluginTurns, is_last_request
from kubedevice.manager.pod_devices import DevicesPerNuma
from kubedevice.manager.state import ManagerState
from kubedevice.manager.types import Change, Container, Pod, TopologyHint

log = logging.getLogger(__name__)


class AffinityStore(Protocol):
    """The topology manager's store of chosen hints (the kubelet's topologymanager.Store)."""

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint: ...


#: UIDs of the pods that are active now (the kubelet's activePods()).
ActivePods = Callable[[], Iterable[str]]


@dataclass(frozen=True, slots=True)
class CallTimeouts:
    allocate: float
    preferred_allocation: float


@dataclass(slots=True)
class _Admission:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Allocator:
    """Chooses, reserves and records the devices of each container admitted."""

    def __init__(
        self,
        state: ManagerState,
        writer: CheckpointWriter,
        metrics: ManagerMetrics,
        timeouts: CallTimeouts,
        *,
        active_pods: ActivePods | None,
        affinity: AffinityStore | None,
        checkpoint_each_allocate: bool = True,
    ) -> None:
        self._state = state
        #: False: `allocate` does not wait for the checkpoint; its caller must before the container starts.
        self.checkpoint_each_allocate = checkpoint_each_allocate
        self._writer = writer
        self._metrics = metrics
        self._timeouts = timeouts
        self.active_pods = active_pods
        self._affinity = affinity
        #: While False: no garbage collection, and the startup running containers take the fast path.
        self.sources_ready = True
        self.startup_running: frozenset[tuple[str, str]] = frozenset()
        #: pod UID -> resource -> devices later containers of the pod may reuse.
        self.reuse: dict[str, dict[str, set[str]]] = {}
        #: pod UID -> its admission in progress (serialises the pod's containers).
        self._admitting: dict[str, _Admission] = {}
        #: The resources' turns, for callers that admit pods concurrently (see plugin_turns).
        self.turns = PluginTurns()

    def update_allocated_devices(self, active_pod_uids: Iterable[str] | None = None) -> list[str]:
        """Drop the allocations of pods that are not active; returns the UIDs dropped.

        Without `active_pod_uids` the `active_pods` callback is asked; with neither nothing happens.
        Nothing happens either while `sources_ready` is False.
        """
        if active_pod_uids is None:
            if self.active_pods is None:
                return []
            active_pod_uids = self.active_pods()
        active = set(active_pod_uids)
        if not self.sources_ready:
            return []
        # A pod whose admission is under way is active whatever the caller's list says.
        active.update(self._admitting)
        to_remove = self._state.pod_devices.pod_uids() - active
        if not to_remove:
            return []
        self._state.pod_devices.delete(to_remove)
        self._state.allocations_changed()
        for uid in to_remove:
            self.reuse.pop(uid, None)
        removed = sorted(to_remove)
        self._state.changes.publish(Change("released", None, tuple(removed)))
        return removed

    async def allocate(
        self, pod: Pod, container: Container, *, already_running: bool = False, durable: bool | None = None
    ) -> None:
        """Give `container` its devices (init containers first, in order). Raises AdmissionError.

        `already_running`: it survived a restart of this manager and keeps its checkpointed devices without
        any check. `durable` (default `checkpoint_each_allocate`): wait for the checkpoint write holding them.
        """
        for resource, quantity in container.limits.items():
            if quantity < 0:
                who = f'container "{container.name}" of pod "{pod.uid}"'
                raise AdmissionError(f"{who} requests a negative quantity {quantity} of {resource}")
        # A pod's containers one at a time, in the caller's order, as the kubelet; pods go concurrently.
        admission = self._admitting.setdefault(pod.uid, _Admission())
        admission.users += 1
        try:
            async with admission.lock:
                allocated = await self._admit_container(pod, container, already_running)
                if allocated and (self.checkpoint_each_allocate if durable is None else durable):
                    await self.write_checkpoint()
        finally:
            admission.users -= 1
            if not admission.users:
                del self._admitting[pod.uid]

    async def write_checkpoint(self) -> None:
        """Once a write begun after this call is on disk (shared: group commit); else AdmissionError."""
        try:
            await self._writer.write()
        except CheckpointWriteError as err:
            raise AdmissionError(str(err)) from None

    async def _admit_container(self, pod: Pod, container: Container, already_running: bool) -> bool:
        # Keep only the pods being admitted in the reuse pool, as the kubelet keeps only the current one.
        for uid in list(self.reuse):
            if uid != pod.uid and uid not in self._admitting:
                del self.reuse[uid]
        reuse = self.reuse.setdefault(pod.uid, {})
        allocated = await self._allocate_container_resources(pod, container, reuse, already_running)
        held = self._state.pod_devices.container_resources(pod.uid, container.name) or {}
        if pod.is_init_container(container.name) and not pod.is_restartable_init_container(container.name):
            for resource, entry in held.items():
                reuse.setdefault(resource, set()).update(entry.device_ids())
        else:
            for resource, entry in held.items():
                if resource in reuse:
                    reuse[resource] -= entry.device_ids()
        return allocated

    async def _allocate_container_resources(
        self, pod: Pod, container: Container, reuse: dict[str, set[str]], already_running: bool
    ) -> bool:
        needs_checkpoint = False
        gc_done = False
        for resource in sorted(container.limits):
            required = container.limits[resource]
            if not self._state.is_device_plugin_resource(resource):
                continue
            if not gc_done:
                self.update_allocated_devices()
                gc_done = True
            picker = await self._devices_to_allocate(
                pod, container, resource, required, reuse.get(resource, set()), already_running
            )
            if is_last_request(pod, container, resource):
                # Its Allocate queues at the endpoint before the next pod runs, which picks while it runs.
                self.turns.last_call(pod.uid, resource)
            if picker is None:
                continue
            try:
                resp = await self._call_allocate(resource, picker.picked)
                devices = self._state.devices.get(resource) or ResourceDevices()
                per_numa: DevicesPerNuma = {}
                for d in sorted(picker.picked):
                    for n in devices.numa_nodes_of(d) or (NO_TOPOLOGY,):
                        per_numa.setdefault(n, []).append(d)
                self._state.pod_devices.insert(pod.uid, container.name, resource, per_numa, resp)
                self._state.allocated.setdefault(resource, set()).update(picker.picked)
            finally:
                self._release(resource, picker)
            needs_checkpoint = True
            self._state.changes.publish(Change("allocated", resource, (pod.uid,)))
        return needs_checkpoint

    async def _call_allocate(self, resource: str, picked: set[str]) -> dp.ContainerAllocateResponse:
        endpoint = self._state.endpoints.get(resource)
        if endpoint is None:
            raise AdmissionError(f"unknown Device Plugin {resource}")
        started = time.perf_counter()
        try:
            resp = await endpoint.allocate(sorted(picked), self._timeouts.allocate)
        except PluginCallError as err:
            raise AdmissionError(
                f"device plugin Allocate rpc for {resource} failed with err: {err}"
            ) from None
        finally:
            self._metrics.alloc_duration_seconds.labels(resource_name=resource).observe(
                time.perf_counter() - started
            )
        if not resp.container_responses:
            text = "{" + str(resp).replace("\n", " ").strip() + "}"
            raise AdmissionError(f"no containers return in allocation response {text}")
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
        """The kubelet's devicesToAllocate; the returned picker's devices are reserved."""
        needed = required
        pre = self._state.pod_devices.container_devices(pod.uid, container.name, resource)
        if pre is not None:
            needed -= len(pre)
            if needed != 0:
                raise AdmissionError(
                    f'pod "{pod.uid}" container "{container.name}" changed request for resource "{resource}" '
                    f"from {len(pre)} to {required}"
                )
        if already_running or (not self.sources_ready and (pod.uid, container.name) in self.startup_running):
            return None
        self._check_healthy(resource, pre)
        if needed == 0:
            return None
        picker = Picker(needed, self._state.in_flight.setdefault(resource, set()), self._state.free, resource)
        try:
            if picker.take(reusable):
                return picker
            available = self.available(resource)
            if len(available) < picker.needed:
                raise AdmissionError(
                    f"requested number of devices unavailable for {resource}. Requested: {picker.needed}, "
                    f"Available: {len(available)}"
                )
            affinity = self._affinity_of(pod, container)
            aligned, unaligned, no_affinity = filter_by_affinity(
                available, self._state.devices[resource], affinity
            )
            if picker.needed < len(aligned):
                preferred = None
                if self._asks_preferred(resource):
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
        devices = self._state.devices.get(resource)
        if devices is None:
            raise AdmissionError(f"cannot allocate unregistered device {resource}")
        if not devices.healthy:
            raise AdmissionError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        if pre and not pre <= devices.healthy:
            raise AdmissionError(
                "previously allocated devices are no longer healthy; "
                f"cannot allocate unhealthy devices {resource}"
            )

    def available(self, resource: str) -> set[str]:
        """The free devices of `resource`: the manager's own set, which callers must only read."""
        free = self._state.free.get(resource)
        if free is None:
            devices = self._state.devices[resource]
            free = self._state.free[resource] = FreeDevices(
                devices.healthy
                - self._state.allocated.get(resource, set())
                - self._state.in_flight.get(resource, set())
            )
        return free

    def _release(self, resource: str, picker: Picker) -> None:
        """End a pick: its devices leave the in-flight set; those not allocated are free again."""
        picker.release()
        free = self._state.free.get(resource)
        devices = self._state.devices.get(resource)
        if free is None or devices is None:
            self._state.free.pop(resource, None)
            return
        allocated = self._state.allocated.get(resource, set())
        free.give_back([d for d in picker.picked if d in devices.healthy and d not in allocated])

    def _revalidate(
        self, resource: str, pod: Pod, container: Container, affinity: frozenset[int] | None
    ) -> tuple[set[str], set[str], set[str]]:
        """After awaiting a plugin: the candidates as they are now (others may have allocated meanwhile)."""
        if resource not in self._state.devices:
            raise AdmissionError(f"cannot allocate unregistered device {resource}")
        return filter_by_affinity(self.available(resource), self._state.devices[resource], affinity)

    def _affinity_of(self, pod: Pod, container: Container) -> frozenset[int] | None:
        if self._affinity is None:
            return None
        nodes = self._affinity.get_affinity(pod.uid, container.name).nodes()
        return None if nodes is None else frozenset(nodes)

    def _asks_preferred(self, resource: str) -> bool:
        """Whether allocation must go through `_preferred_allocation` (which also reports a lost endpoint)."""
        endpoint = self._state.endpoints.get(resource)
        return endpoint is None or (
            endpoint.options is not None and endpoint.options.get_preferred_allocation_available
        )

    async def _preferred_allocation(
        self, resource: str, available: set[str], must_include: set[str], size: int
    ) -> set[str] | None:
        endpoint = self._state.endpoints.get(resource)
        if endpoint is None:
            raise AdmissionError(f"endpoint not found in cache for a registered resource: {resource}")
        if endpoint.options is None or not endpoint.options.get_preferred_allocation_available:
            return None
        try:
            resp = await endpoint.get_preferred_allocation(
                sorted(available), sorted(must_include), size, self._timeouts.preferred_allocation
            )
        except PluginCallError as err:
            raise AdmissionError(
                f"device plugin GetPreferredAllocation rpc for {resource} failed with err: {err}"
            ) from None
        if not resp.container_responses:
            return set()
        return set(resp.container_responses[0].deviceIDs)
