"""Scopes: which hints are merged (per container, per pod, none) and the store the allocators read back.

The store answers GetAffinity(pod UID, container name); AddContainer/RemoveContainer follow started and
stopped containers so a stopped container's hint goes with it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubedevice.topology.hint import NO_HINT, TopologyHint
from kubedevice.topology.metrics import TopologyMetrics
from kubedevice.topology.policy import POLICY_SINGLE_NUMA_NODE, Policy, ProviderHints

SCOPE_CONTAINER = "container"
SCOPE_POD = "pod"
SCOPE_NONE = "none"
SCOPES = (SCOPE_CONTAINER, SCOPE_POD)

ERR_TOPOLOGY_AFFINITY = "TopologyAffinityError"
ERR_TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"
ERR_UNEXPECTED_ADMISSION = "UnexpectedAdmissionError"
BOUNDARY_NUMA_NODE = "numa_node"


class ContainerLike(Protocol):
    @property
    def name(self) -> str: ...


class PodLike(Protocol):
    @property
    def uid(self) -> str: ...
    @property
    def init_containers(self) -> Sequence[ContainerLike]: ...
    @property
    def containers(self) -> Sequence[ContainerLike]: ...


class HintProvider(Protocol):
    """A resource manager that gives hints and then allocates honouring the stored affinity.

    The pod and container are the caller's own types (the device manager's Pod and Container).
    """

    def get_topology_hints(self, pod: Any, container: Any) -> ProviderHints: ...
    def get_pod_topology_hints(self, pod: Any) -> ProviderHints: ...
    async def allocate(self, pod: Any, container: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class AdmitResult:
    admit: bool
    reason: str = ""
    message: str = ""
    #: The provider's own error when an allocation failed, for callers that show its text.
    error: Exception | None = field(default=None, compare=False)
    #: A TopologyAffinityError's why: the providers' hints the policy found no admissible merge of, and
    #: the container they were for ("" with the pod scope).
    hints: tuple[ProviderHints, ...] = field(default=(), compare=False)
    container: str = ""


def _rejected_for_topology(hints: Sequence[ProviderHints], container: str = "") -> AdmitResult:
    return AdmitResult(
        False, ERR_TOPOLOGY_AFFINITY, ERR_TOPOLOGY_AFFINITY_MESSAGE, hints=tuple(hints), container=container
    )


def result_from_error(err: Exception) -> AdmitResult:
    """A typed admission error keeps its reason; anything else is the kubelet's "unexpected" rejection."""
    reason = getattr(err, "admission_reason", None)
    if isinstance(reason, str) and reason:
        return AdmitResult(False, reason, str(err), err)
    return AdmitResult(
        False, ERR_UNEXPECTED_ADMISSION, f"Allocate failed due to {err}, which is unexpected", err
    )


def starting_order(pod: PodLike) -> list[ContainerLike]:
    return [*pod.init_containers, *pod.containers]


class HintStore:
    """hints[pod UID][container name] and the container IDs that keep them alive, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hints: dict[str, dict[str, TopologyHint]] = {}
        self._containers: dict[str, tuple[str, str]] = {}

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        with self._lock:
            return self._hints.get(pod_uid, {}).get(container_name, NO_HINT)

    def pod_hints(self, pod_uid: str) -> dict[str, TopologyHint]:
        with self._lock:
            return dict(self._hints.get(pod_uid, {}))

    def set_hint(self, pod_uid: str, container_name: str, hint: TopologyHint) -> None:
        with self._lock:
            self._hints.setdefault(pod_uid, {})[container_name] = hint

    def add_container(self, pod_uid: str, container_name: str, container_id: str) -> None:
        with self._lock:
            self._containers[container_id] = (pod_uid, container_name)

    def remove_container(self, container_id: str) -> None:
        """Forget a stopped container; its hint goes unless another ID (a restart) still uses it."""
        with self._lock:
            key = self._containers.pop(container_id, None)
            if key is None or key in self._containers.values():
                return
            pod_hints = self._hints.get(key[0])
            if pod_hints is not None:
                pod_hints.pop(key[1], None)
                if not pod_hints:
                    del self._hints[key[0]]

    def remove_pod(self, pod_uid: str) -> None:
        """Drop every hint and container ID of a pod that is gone (never started, or deleted)."""
        with self._lock:
            self._hints.pop(pod_uid, None)
            for cid in [c for c, (uid, _) in self._containers.items() if uid == pod_uid]:
                del self._containers[cid]


@dataclass(slots=True)
class Scope:
    """Admits one pod: merge per scope, store the hint, then let every provider allocate."""

    name: str
    policy: Policy
    store: HintStore
    providers: list[HintProvider]
    metrics: TopologyMetrics

    async def admit(self, pod: PodLike) -> AdmitResult:
        if self.name == SCOPE_NONE:
            return await self._admit_none(pod)
        if self.name == SCOPE_POD:
            return await self._admit_pod(pod)
        return await self._admit_containers(pod)

    async def _admit_none(self, pod: PodLike) -> AdmitResult:
        for container in starting_order(pod):
            if (failed := await self._allocate(pod, container)) is not None:
                return failed
        return AdmitResult(True)

    async def _admit_containers(self, pod: PodLike) -> AdmitResult:
        for container in starting_order(pod):
            hints = [p.get_topology_hints(pod, container) for p in self.providers]
            best, ok = self.policy.merge(hints)
            if not ok:
                self.metrics.admission_errors.inc()
                return _rejected_for_topology(hints, container.name)
            # Stored before allocating: the device manager reads it back while it picks devices.
            self.store.set_hint(pod.uid, container.name, best)
            if (failed := await self._allocate(pod, container)) is not None:
                return failed
            if self.policy.name == POLICY_SINGLE_NUMA_NODE:
                self.metrics.aligned.inc(SCOPE_CONTAINER, BOUNDARY_NUMA_NODE)
        return AdmitResult(True)

    async def _admit_pod(self, pod: PodLike) -> AdmitResult:
        hints = [p.get_pod_topology_hints(pod) for p in self.providers]
        best, ok = self.policy.merge(hints)
        if not ok:
            self.metrics.admission_errors.inc()
            return _rejected_for_topology(hints)
        for container in starting_order(pod):
            self.store.set_hint(pod.uid, container.name, best)
            if (failed := await self._allocate(pod, container)) is not None:
                return failed
        if self.policy.name == POLICY_SINGLE_NUMA_NODE:
            self.metrics.aligned.inc(SCOPE_POD, BOUNDARY_NUMA_NODE)
        return AdmitResult(True)

    async def _allocate(self, pod: PodLike, container: ContainerLike) -> AdmitResult | None:
        for p in self.providers:
            try:
                await p.allocate(pod, container)
            except Exception as err:  # every provider failure is a rejection, as in the kubelet
                if self.name != SCOPE_NONE:  # the none scope counts no admission errors
                    self.metrics.admission_errors.inc()
                return result_from_error(err)
        return None
