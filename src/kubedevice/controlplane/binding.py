"""Binding conditions (KEP-5007): what the scheduler's DRA plugin waits for before the pod is bound, decided
without side effects.

A device may publish `bindingConditions` (and `bindingFailureConditions`); the allocation copies them into
each result. Upstream's PreBind reserves the claims, then polls until every binding condition of every
result is `True` in the claim's `status.devices[]` entry of that device (`isClaimReadyForBinding`); a
failure condition `True` (`claim <name> binding failed: reason=..., message="..."`) or the binding timeout
counted from `status.allocation.allocationTimestamp` (`claim <name> binding timeout`, `isClaimTimeout`)
fails PreBind, and the next scheduling cycle deallocates the claim (PostFilter, `deallocation of
ResourceClaim completed`) so that it is allocated again. Here the pod waits before PrepareResources:

- `pod_binding(claims, now, timeout)`: None when the pod may be prepared, a :class:`BindingWait` naming each
  device and the conditions not `True` yet with the wait's deadline, or a :class:`BindingFailure`;
- `binding_release(state, key, pod_uid)`: the update that deallocates a failed claim the daemon
  allocated, when no other pod holds it (PostFilter's rule);
- :class:`BindingWaits`: both for one pod, as its Pending status says it, keeping why its last attempt
  failed for the next wait's detail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from kubedevice.api.constants import DRA_BINDING_TIMEOUT_S
from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore, Updates
from kubedevice.controlplane.pod_step import Waiting
from kubedevice.dra.types import DRAPod
from kubedevice.resource.device_status import device_conditions
from kubedevice.resource.model import ClaimDocument, DeviceRequestAllocationResult
from kubedevice.resource.times import metav1_time, parse_time
from kubedevice.scheduler.request import SCHEDULER_ERROR
from kubedevice.wording import go_quote

__all__ = [
    "BINDING_PENDING",
    "BINDING_TIMEOUT_S",
    "DEALLOCATED",
    "BindingFailure",
    "BindingStep",
    "BindingWait",
    "BindingWaits",
    "DeviceWait",
    "binding_release",
    "pod_binding",
    "waiting_message",
]

#: The reason of a pod waiting for its binding conditions (the scheduler's event reason).
BINDING_PENDING = "BindingConditionsPending"
#: Upstream's `BindingTimeoutDefaultSeconds` (the DynamicResources plugin's `bindingTimeout`).
BINDING_TIMEOUT_S = DRA_BINDING_TIMEOUT_S
#: PostFilter's status once it deallocated a claim that failed its binding.
DEALLOCATED = "deallocation of ResourceClaim completed"
_PLUGIN = "DynamicResources"


def waiting_message(node_name: str) -> str:
    """The pod's message while it waits (the scheduler's BindingConditionsPending event)."""
    return f"waiting for binding conditions for device on node {node_name}"


@dataclass(frozen=True, slots=True)
class DeviceWait:
    """One allocated device whose binding conditions are not all `True` yet."""

    claim: str
    result: DeviceRequestAllocationResult
    #: Its binding conditions that are not `True`, in the result's order.
    missing: tuple[str, ...]

    def text(self) -> str:
        r = self.result
        device = f"{r.driver}/{r.pool}/{r.device}" + (f"/{r.share_id}" if r.share_id else "")
        return f"claim {self.claim}: {device} waits for {', '.join(self.missing)} to be True"


@dataclass(frozen=True, slots=True)
class BindingWait:
    waits: tuple[DeviceWait, ...]
    #: When the wait times out: the earliest `allocationTimestamp` plus the timeout among the claims waited
    #: for; None when none of them has a timestamp (a user-written allocation never times out).
    deadline: datetime | None

    def detail(self) -> str:
        said = "; ".join(w.text() for w in self.waits)
        if self.deadline is not None:
            said += f" (binding times out at {metav1_time(self.deadline)})"
        return said


@dataclass(frozen=True, slots=True)
class BindingFailure:
    """A claim whose binding failed or timed out: `error` is upstream's PreBind error."""

    claim_key: str
    error: str

    @property
    def message(self) -> str:
        """The pod's status message, as the scheduler's framework wraps a PreBind error."""
        return f"running PreBind plugin {go_quote(_PLUGIN)}: {self.error}"


def pod_binding(
    claims: Sequence[ClaimDocument], now: datetime, timeout: float
) -> BindingWait | BindingFailure | None:
    """Whether the pod's claims (in the pod's order) let it be prepared: None when every binding condition
    is `True`; the first claim that failed or timed out; else what it waits for."""
    waits: list[DeviceWait] = []
    deadlines: list[datetime] = []
    for claim in claims:
        allocation = claim.allocation
        if allocation is None:
            continue
        claim_waits: list[DeviceWait] = []
        for result in allocation.results:
            if not result.binding_conditions:
                continue
            conditions = device_conditions(
                claim.device_status, result.driver, result.pool, result.device, result.share_id
            )
            true = {c.type: c for c in conditions if c.status == "True"}
            failed = next((true[t] for t in result.binding_failure_conditions if t in true), None)
            if failed is not None:
                return BindingFailure(
                    claim.meta.key,
                    f"claim {claim.meta.name} binding failed: reason={failed.reason}, "
                    f"message={go_quote(failed.message)}",
                )
            missing = tuple(t for t in result.binding_conditions if t not in true)
            if missing:
                claim_waits.append(DeviceWait(claim.meta.key, result, missing))
        if not claim_waits:
            continue
        stamp = parse_time(allocation.allocation_timestamp or "")
        if stamp is not None:
            deadline = stamp + timedelta(seconds=timeout)
            if deadline < now:
                return BindingFailure(claim.meta.key, f"claim {claim.meta.name} binding timeout")
            deadlines.append(deadline)
        waits.extend(claim_waits)
    if not waits:
        return None
    return BindingWait(tuple(waits), min(deadlines, default=None))


def binding_release(state: ClaimStore, key: str, pod_uid: str) -> dict[str, ClaimRecord | None] | None:
    """The update that deallocates a claim whose binding failed (its reservation and device statuses go
    with it), or None when it cannot be: not the daemon's allocation, or reserved for another pod too
    (PostFilter deallocates a claim reserved for none or only this pod)."""
    record = state.get(key)
    if record is None or record.allocation is None:
        return None
    if any(r.uid != pod_uid for r in record.reserved_for):
        return None
    new = replace(record, allocation=None, reserved_for=(), devices=())
    return {key: None if new.empty else new}


@dataclass(frozen=True, slots=True)
class BindingStep:
    """The binding part of one pod's step: why it waits (None: it may be prepared), until when at the
    latest, and the deallocation of a claim whose binding failed (to apply, then say `said`)."""

    waiting: Waiting | None = None
    retry_at: datetime | None = None
    release: Updates | None = None
    said: str = ""


class BindingWaits:
    """The pods' waits for binding conditions on node `node_name`, each at most `timeout` seconds from its
    claim's allocation."""

    def __init__(self, node_name: str, timeout: float = BINDING_TIMEOUT_S) -> None:
        self.node_name = node_name
        self.timeout = timeout
        #: pod UID -> why its last binding attempt failed, said in its next wait's detail.
        self._failures: dict[str, str] = {}

    def check(
        self, pod: DRAPod, claims: Sequence[ClaimDocument], state: ClaimStore, now: datetime
    ) -> BindingStep:
        outcome = pod_binding(claims, now, self.timeout)
        if outcome is None:
            self._failures.pop(pod.uid, None)
            return BindingStep()
        if isinstance(outcome, BindingWait):
            detail = outcome.detail()
            if pod.uid in self._failures:
                detail += f"; the last binding attempt: {self._failures[pod.uid]}"
            waiting = Waiting(BINDING_PENDING, waiting_message(self.node_name), detail)
            return BindingStep(waiting, outcome.deadline)
        release = binding_release(state, outcome.claim_key, pod.uid)
        if release is None:
            # Not the daemon's to undo (a manifest's allocation, or another pod holds it): it waits.
            return BindingStep(Waiting(SCHEDULER_ERROR, outcome.message, "still not schedulable"))
        said = f"{outcome.message}; {DEALLOCATED}"
        self._failures[pod.uid] = said
        return BindingStep(Waiting(SCHEDULER_ERROR, outcome.message, DEALLOCATED), None, release, said)

    def forget(self, pod_uid: str) -> None:
        self._failures.pop(pod_uid, None)
