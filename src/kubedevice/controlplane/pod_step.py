"""The DRA step of one pod, decided without side effects: what the scheduler and the claim controller
would do before the kubelet prepares.

`dra_step(pod, claims, routes, state, context)` returns a :class:`StepResult`:
- `pod`: the pod as the DRA manager sees it (`resourceClaimStatuses` naming the generated claims, the
  special claim in `extendedResourceClaimStatus`), for PrepareResources and GetResources;
- `updates`: what to apply to the ClaimStore (`state.apply(result.updates)`, then save when it returns
  True): claims generated from templates and the special claim (even when the pod must wait, as the
  claim controller creates them whatever the scheduler decides), the allocations of one search, and the
  reservations for the pod;
- `waiting`: None when the pod may go on to PrepareResources; else the reason, message and detail the
  pod's Pending status shows (nothing is allocated or reserved then).

Order, as a scheduler would: the template claims are generated (a missing template or an adminAccess
request the namespace forbids stops here), the claims resolved in pod-claim order with the special claim
last (a missing document stops here with the kubelet's fetch text), each checked for room for one more
consumer, then every claim without allocation goes into one search (all or nothing), and the pod is
reserved on each claim whose document leaves `reservedFor` to the daemon.

After the pod: `reservation.release_pod` when it has been unprepared, `reservation.pod_removed` when it is
gone (its generated claims go too). After a restart, `restore_pod` gives a running pod's DRA view back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kubedevice.checkpoint.dra_model import ClaimInfoState
from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore, allocated_state, effective_claim
from kubedevice.controlplane.extended import ExtendedRoutes, special_claim, special_claim_name
from kubedevice.controlplane.reservation import ReservationError, check_room, reserve
from kubedevice.controlplane.templates import (
    ClaimNotCreated,
    PodRef,
    bare_generated_claim,
    claim_from_template,
    generated_claim_name,
    template_for,
)
from kubedevice.dra import types as dra
from kubedevice.dra.claim_names import pod_claim_names
from kubedevice.dra.errors import PREPARE_FAILED, DRAError
from kubedevice.dra.manager import operation_prefix
from kubedevice.manager.types import Pod
from kubedevice.resource.model import ClaimDocument, DRADocuments
from kubedevice.resource.pod_claims import PodClaims
from kubedevice.resource.slice_model import Pool
from kubedevice.scheduler.allocator import (
    AllocationRequest,
    ClaimToAllocate,
    Unschedulable,
    allocate,
    check_admin_access,
)
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.scheduler.explanation import RequestExplanation
from kubedevice.scheduler.request import UNSCHEDULABLE

__all__ = [
    "DRAContext",
    "StepResult",
    "Waiting",
    "dra_step",
    "recorded_routes",
    "restore_pod",
]


@dataclass(frozen=True, slots=True)
class DRAContext:
    """What the step reads besides the pod and the claim state."""

    documents: DRADocuments
    pools: Sequence[Pool]
    node_name: str
    #: The DRA manager's claim-info cache now (`[s for s, _ in manager.claim_infos()]`).
    cache: Sequence[ClaimInfoState] = ()
    #: The daemon's long-lived CEL selectors (their cache keeps searches cheap).
    selectors: CelSelectors | None = None
    #: Now, as metav1.Time writes it: an allocation made now gets it as its `allocationTimestamp`, which
    #: the binding timeout counts from ("": none written).
    now: str = ""
    #: The node's labels, matched by node selectors (`kubernetes.io/hostname` among them).
    node_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why a pod stays Pending: its status reason, message and (for a missing template) detail; and, when
    the search found nothing, per request what ruled the devices out (`Unschedulable.explanation`)."""

    reason: str
    message: str
    detail: str = ""
    explanation: tuple[RequestExplanation, ...] = ()


@dataclass(frozen=True, slots=True)
class StepResult:
    pod: dra.DRAPod
    updates: Mapping[str, ClaimRecord | None] = field(default_factory=dict)
    waiting: Waiting | None = None

    @property
    def ready(self) -> bool:
        return self.waiting is None


def _prepare_failed(cause: str, detail: str = "") -> Waiting:
    return Waiting(
        PREPARE_FAILED,
        f"Failed to prepare dynamic resources: {operation_prefix('PrepareResources')}: {cause}",
        detail,
    )


class _Step:
    """One pod's decision; `updates` overlays the state so later parts see earlier ones."""

    def __init__(self, pod: Pod, state: ClaimStore, context: DRAContext) -> None:
        self.pod = pod
        self.ref = PodRef(pod.namespace, pod.name, pod.uid)
        self.state = state
        self.context = context
        self.updates: dict[str, ClaimRecord | None] = {}

    def record(self, key: str) -> ClaimRecord | None:
        return self.updates[key] if key in self.updates else self.state.get(key)

    def key(self, name: str) -> str:
        return f"{self.pod.namespace}/{name}"

    def generate(self, claims: PodClaims, create: bool) -> tuple[dict[str, str | None], Waiting | None]:
        """The template claims: `resourceClaimStatuses`, and the first reason one cannot be made."""
        statuses: dict[str, str | None] = {}
        waiting: Waiting | None = None
        for pod_claim in claims.resource_claims:
            template_name = pod_claim.resource_claim_template_name
            if pod_claim.resource_claim_name is not None or template_name is None:
                continue
            name = generated_claim_name(self.pod.name, self.pod.uid, pod_claim.name)
            key = self.key(name)
            record = self.record(key)
            made = record is not None and record.generated_for == self.pod.uid
            if made and record is not None and record.document is not None:
                statuses[pod_claim.name] = name
                continue
            try:
                template = template_for(self.context.documents.templates, self.ref, template_name)
                document = claim_from_template(self.ref, pod_claim.name, template)
                if not made:
                    check_admin_access(
                        ClaimToAllocate(self.pod.namespace, name, document.spec),
                        self.context.documents.namespaces,
                    )
            except ClaimNotCreated as err:
                if made and record is not None:
                    # Generated before a restart, its template gone since: the claim itself stays.
                    document = bare_generated_claim(self.ref, name, record.uid)
                else:
                    waiting = waiting or _prepare_failed(err.message, err.detail)
                    continue
            except Unschedulable as err:
                waiting = waiting or Waiting(UNSCHEDULABLE, err.message)
                continue
            if made and record is not None:
                document = replace(document, meta=replace(document.meta, uid=record.uid))
                self.updates[key] = replace(record, document=document)
            elif create:
                self.updates[key] = ClaimRecord(
                    uid=document.meta.uid, generated_for=self.pod.uid, document=document
                )
            else:
                continue
            statuses[pod_claim.name] = name
        return statuses, waiting

    def extended(self, routes: ExtendedRoutes) -> dra.ExtendedResourceClaimStatus | None:
        made = special_claim(self.pod, routes)
        if made is None:
            return None
        key = made.document.meta.key
        record = self.record(key)
        if record is None or record.extended_for != self.pod.uid:
            record = ClaimRecord(
                uid=made.document.meta.uid, extended_for=self.pod.uid, extended_resources=dict(routes.dra)
            )
        document = replace(made.document, meta=replace(made.document.meta, uid=record.uid))
        self.updates[key] = replace(record, document=document)
        return made.status

    def claims(self, pod: dra.DRAPod) -> list[tuple[str, ClaimDocument | None, ClaimDocument]] | Waiting:
        """(key, user document, effective claim) per claim in search order, or why the pod waits."""
        out: list[tuple[str, ClaimDocument | None, ClaimDocument]] = []
        try:
            names = pod_claim_names(pod)
        except DRAError as err:  # unreachable with generated statuses; kept for a hand-made pod
            return _prepare_failed(str(err))
        for claim_name in names:
            name = claim_name.claim_name
            key = self.key(name)
            if any(k == key for k, _, _ in out):
                continue
            document = self.context.documents.claims.get(key)
            record = self.record(key)
            if document is not None and record is not None and record.uid != document.meta.uid:
                if record.reserved_for or record.allocation is not None:
                    return _prepare_failed(
                        f"old ResourceClaim with same name {name} and different UID {record.uid} "
                        "still exists (previous pod force-deleted?!)"
                    )
                self.updates[key] = None  # the replaced object's empty record
                record = None
            claim = effective_claim(document, record)
            if claim is None:
                return _prepare_failed(
                    f"fetch ResourceClaim {name}: {dra.ClaimNotFoundError(pod.namespace, name)}"
                )
            try:
                check_room(key, document, record, self.pod.uid)
            except ReservationError as err:
                return Waiting(UNSCHEDULABLE, err.message)
            out.append((key, document, claim))
        return out

    def allocate(self, claims: list[tuple[str, ClaimDocument | None, ClaimDocument]]) -> Waiting | None:
        wanted = [(key, claim) for key, _, claim in claims if claim.allocation is None]
        if not wanted:
            return None
        context = self.context
        allocated = allocated_state(self.state, context.documents, context.cache)
        request = AllocationRequest(
            claims=tuple(ClaimToAllocate(c.meta.namespace, c.meta.name, c.spec) for _, c in wanted),
            classes=context.documents.classes,
            pools=context.pools,
            in_use=allocated.in_use,
            namespaces=context.documents.namespaces,
            node_name=context.node_name,
            node_labels=context.node_labels,
            consumed_capacity=allocated.consumed_capacity,
            taint_rules=tuple(context.documents.taint_rules.values()),
        )
        try:
            allocations = allocate(request, context.selectors)
        except Unschedulable as err:
            return Waiting(UNSCHEDULABLE, err.message, explanation=err.explanation)
        stamp = context.now or None
        for (key, claim), allocation in zip(wanted, allocations, strict=True):
            allocation = replace(allocation, allocation_timestamp=stamp)
            record = self.record(key) or ClaimRecord(uid=claim.meta.uid)
            self.updates[key] = replace(record, allocation=allocation)
        return None

    def reserve(self, claims: list[tuple[str, ClaimDocument | None, ClaimDocument]]) -> None:
        for key, document, claim in claims:
            new = reserve(key, document, self.record(key), claim.meta.uid, self.pod.name, self.pod.uid)
            if new is not None:
                self.updates[key] = new


def dra_step(
    pod: Pod, claims: PodClaims, routes: ExtendedRoutes, state: ClaimStore, context: DRAContext
) -> StepResult:
    """The decision for one pod about to be prepared; see the module's text. `routes` is the pod's
    extended-resource decision, made once at admission (`extended.route_extended_resources`); a
    decision already recorded for the pod wins over it, so it never flips."""
    routes = recorded_routes(state, pod) or routes
    step = _Step(pod, state, context)
    statuses, waiting = step.generate(claims, create=True)
    extended = step.extended(routes)
    dra_pod = dra.DRAPod.from_claims(pod.uid, pod.namespace, pod.name, claims, statuses, extended)
    if waiting is not None:
        return StepResult(dra_pod, step.updates, waiting)
    resolved = step.claims(dra_pod)
    if isinstance(resolved, Waiting):
        return StepResult(dra_pod, step.updates, resolved)
    waiting = step.allocate(resolved)
    if waiting is not None:
        generated = {k: v for k, v in step.updates.items() if v is None or v.generated}
        return StepResult(dra_pod, generated, waiting)
    step.reserve(resolved)
    return StepResult(dra_pod, step.updates, None)


def recorded_routes(state: ClaimStore, pod: Pod) -> ExtendedRoutes | None:
    """The extended-resource decision recorded for a pod (its special claim's), or None when none was;
    one look-up, as the special claim's name follows from the pod's name and UID."""
    record = state.get(f"{pod.namespace}/{special_claim_name(pod.name, pod.uid)}")
    if record is None or record.extended_for != pod.uid:
        return None
    return ExtendedRoutes(dict(record.extended_resources))


def restore_pod(pod: Pod, claims: PodClaims, state: ClaimStore, documents: DRADocuments) -> StepResult:
    """A running pod after a restart: its DRA view (statuses and the special claim, from the recorded
    decision) and its generated claims' documents rebuilt in memory; nothing is generated or allocated."""
    step = _Step(pod, state, DRAContext(documents=documents, pools=(), node_name=""))
    statuses, _ = step.generate(claims, create=False)
    routes = recorded_routes(state, pod)
    extended = step.extended(routes) if routes is not None else None
    dra_pod = dra.DRAPod.from_claims(pod.uid, pod.namespace, pod.name, claims, statuses, extended)
    return StepResult(dra_pod, step.updates, None)
