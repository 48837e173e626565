"""The node's pods: what each manifest pod became (phase, reason, message, run options)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kubedevice.manager.types import Pod, RunContainerOptions
from kubedevice.node.conditions import PodCondition

if TYPE_CHECKING:
    from kubedevice.controlplane.extended import ExtendedRoutes
    from kubedevice.dra.types import DRAPod
    from kubedevice.node.manifests import PodManifest
    from kubedevice.node.state import SavedPod
    from kubedevice.scheduler.explanation import RequestExplanation

PodPhase = Literal["Pending", "Running", "Failed", "Succeeded"]
PHASES: tuple[PodPhase, ...] = ("Pending", "Running", "Failed", "Succeeded")
#: The kubelet's pod status reason when the device manager refuses a pod.
ADMISSION_ERROR_REASON = "UnexpectedAdmissionError"
#: The phases of the kubelet's "active pods", whose devices are kept.
_ACTIVE_PHASES: frozenset[PodPhase] = frozenset(("Pending", "Running"))


@dataclass(slots=True)
class PodRecord:
    manifest: PodManifest
    reason: str = ""
    message: str = ""
    #: The daemon's own why of a refusal (the kubelet's message stays in `message`); not saved.
    detail: str = ""
    #: What the pod runs without (a resource no plugin serves), said once at its admission; not saved.
    warnings: list[str] = field(default_factory=list)
    #: `status.conditions` the daemon set (an eviction's DisruptionTarget); saved with a terminated pod.
    conditions: tuple[PodCondition, ...] = ()
    #: While it waits for its claims because the search found nothing: per request, what ruled the
    #: devices out (the scheduler's Unschedulable.explanation); not saved.
    explanation: tuple[RequestExplanation, ...] = ()
    #: container name -> run options computed when it started (None: it holds no devices).
    run_options: dict[str, RunContainerOptions | None] = field(default_factory=dict)
    _phase: PodPhase = "Pending"
    #: Its manifest is gone but its claims are not unprepared yet: shown with its last phase, not active.
    _terminating: bool = False
    #: Which of its extended resources DRA meets (node.dra.extended), decided once at admission.
    _routes: ExtendedRoutes | None = None
    #: The pod without those resources, as the device manager sees it.
    _device_pod: Pod | None = None
    #: The pod as the DRA manager is handed it, from the control plane's last answer (its claim statuses).
    _dra_pod: DRAPod | None = None
    #: The table holding the record, told of every phase change (it keeps the active UIDs).
    _table: PodTable | None = field(default=None, repr=False, compare=False)

    @property
    def phase(self) -> PodPhase:
        return self._phase

    @phase.setter
    def phase(self, phase: PodPhase) -> None:
        self._phase = phase
        if self._table is not None:
            self._table.phase_changed(self)

    @property
    def terminating(self) -> bool:
        return self._terminating

    @terminating.setter
    def terminating(self, terminating: bool) -> None:
        self._terminating = terminating
        if self._table is not None:
            self._table.phase_changed(self)

    @property
    def uid(self) -> str:
        return self.manifest.uid

    @property
    def pod(self) -> Pod:
        return self.manifest.pod

    @property
    def routes(self) -> ExtendedRoutes | None:
        """The extended-resource decision: names met by DRA, each with its DeviceClass (None: not made)."""
        return self._routes

    @routes.setter
    def routes(self, routes: ExtendedRoutes | None) -> None:
        # Made once kubelet.sock is served: the daemon imports DRA's modules only then.
        from kubedevice.controlplane.extended import without_dra_resources

        self._routes = routes
        self._device_pod = without_dra_resources(self.pod, routes) if routes else None

    @property
    def has_claims(self) -> bool:
        """The pod has claims: in its manifest, or the special claim of its DRA-backed extended resources."""
        return bool(self.manifest.claims) or bool(self._routes)

    @property
    def dra_pod(self) -> DRAPod:
        """The pod as the DRA manager is handed it: the control plane's last answer for it, else its
        manifest's own view (no generated claim named yet)."""
        return self._dra_pod if self._dra_pod is not None else self.manifest.dra_pod()

    @dra_pod.setter
    def dra_pod(self, pod: DRAPod) -> None:
        self._dra_pod = pod

    @property
    def device_pod(self) -> Pod:
        """The pod as the device manager sees it: its DRA-backed extended resources left out."""
        return self._device_pod if self._device_pod is not None else self.manifest.pod

    @property
    def active(self) -> bool:
        """The kubelet's "active pod": not terminated, so its devices are kept."""
        return self.phase in _ACTIVE_PHASES and not self._terminating

    def saved(self, phase: PodPhase | None = None) -> SavedPod:
        # The daemon makes its table before serving kubelet.sock, and saves pods only after.
        from kubedevice.node.state import SavedPod

        return SavedPod(
            namespace=self.pod.namespace,
            name=self.pod.name,
            phase=phase or self.phase,
            reason=self.reason,
            message=self.message,
            digest=self.manifest.digest,
            conditions=self.conditions,
        )


class PodTable:
    """Pods by UID, in the order they were first seen."""

    def __init__(self) -> None:
        self._pods: dict[str, PodRecord] = {}
        #: UIDs of the active pods, kept as phases change: the manager asks on every admission.
        self._active: set[str] = set()

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def __iter__(self) -> Iterator[PodRecord]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def get(self, uid: str) -> PodRecord | None:
        return self._pods.get(uid)

    def add(self, record: PodRecord) -> None:
        self.remove(record.uid)
        self._pods[record.uid] = record
        record._table = self
        self.phase_changed(record)

    def remove(self, uid: str) -> PodRecord | None:
        record = self._pods.pop(uid, None)
        if record is not None:
            record._table = None
            self._active.discard(uid)
        return record

    def uids(self) -> frozenset[str]:
        return frozenset(self._pods)

    def phase_changed(self, record: PodRecord) -> None:
        if record.active:
            self._active.add(record.uid)
        else:
            self._active.discard(record.uid)

    def active_uids(self) -> frozenset[str]:
        """The manager's active-pods callback, asked on every admission: a copy of a kept set."""
        return frozenset(self._active)

    def count_by_phase(self) -> dict[PodPhase, int]:
        counts: dict[PodPhase, int] = dict.fromkeys(PHASES, 0)
        for record in self._pods.values():
            counts[record.phase] += 1
        return counts

    def saved(self) -> dict[str, SavedPod]:
        return {r.uid: r.saved() for r in self._pods.values()}
