"""The device taint eviction controller's rules (`pkg/controller/devicetainteviction`), without side effects.

A `NoExecute` taint on an allocated device, from the device's slice or from a DeviceTaintRule that selects
it, evicts every pod using the claim unless the allocation result tolerates it: for each such taint, a
toleration of the result with effect `NoExecute` that tolerates the taint (`resourceclaim.ToleratesTaint`)
and no `tolerationSeconds` tolerates it for good; with `tolerationSeconds` (the smallest of those that
match, a negative one counting as 0) the pod goes that long after the taint was added; without a matching
toleration it goes at once (`claimEvictionTime`). A pod goes at the earliest time of its claims that are
reserved for it, for every taint that counts (`podEvictionTime`). When a taint was added is its
`timeAdded`, or (the API server stamps one when it is missing) when the daemon first saw it
(controlplane.taint_times), so a restart does not start a countdown again.

What the pod gets is upstream's: the condition `DisruptionTarget` with reason `DeletionByDeviceTaintManager`
and message `Device Taint manager: deleting due to NoExecute taint`. A DeviceTaintRule's status is one
condition, `EvictionInProgress` (`maybeUpdateRuleStatus`): see :func:`rule_condition`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from kubedevice.resource.model import ClaimDocument, DeviceID, DeviceTaintRuleDocument
from kubedevice.resource.slice_model import Pool
from kubedevice.resource.taints import DeviceTaint, tolerates

__all__ = [
    "DISRUPTION_TARGET",
    "EVICTION_MESSAGE",
    "EVICTION_REASON",
    "NO_EXECUTE",
    "RULE_CONDITION",
    "DeviceTaints",
    "Eviction",
    "RuleCounts",
    "TrackedTaint",
    "allocated_selected",
    "claim_eviction",
    "pod_eviction",
    "pods_by_rule",
    "published_selected",
    "rule_condition",
    "simulated",
]

NO_EXECUTE = "NoExecute"
#: The pod condition the controller adds before it deletes the pod, and its reason and message.
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_REASON = "DeletionByDeviceTaintManager"
EVICTION_MESSAGE = "Device Taint manager: deleting due to NoExecute taint"
#: `DeviceTaintConditionEvictionInProgress`, the one condition of a DeviceTaintRule's status.
RULE_CONDITION = "EvictionInProgress"


@dataclass(frozen=True, slots=True)
class TrackedTaint:
    """A `NoExecute` taint on one device and where it comes from: a DeviceTaintRule (`rule`, its name) or
    the device's slice (`slice`, its name, and the taint's index among the device's taints)."""

    taint: DeviceTaint
    device: DeviceID
    rule: str = ""
    rule_uid: str = ""
    slice: str = ""
    index: int = 0

    @property
    def key(self) -> tuple[str, ...]:
        """What its first sighting is recorded under: a rule's UID and effect (the API server stamps a
        rule's taint again when its effect changes), or the device and the taint (`key=value:Effect`)."""
        if self.rule:
            return ("rule", self.rule_uid, self.taint.effect)
        return ("device", *self.device, self.taint.text())

    def source(self) -> str:
        """Where it comes from, in upstream's words (`trackedTaint.String`)."""
        if self.rule:
            return f"DeviceTaintRule {self.rule}"
        driver, pool, device = self.device
        return f"ResourceSlice {self.slice} {driver}/{pool}/{device} taint #{self.index}"

    def text(self) -> str:
        """`example.com/x=y:NoExecute of DeviceTaintRule maintenance on gpu.example.com/node-1/gpu-0`."""
        return f"{self.taint.text()} of {self.source()} on {'/'.join(self.device)}"

    def order(self) -> tuple[int, str, str, str, str, int]:
        """Upstream's order of the reasons: rules first by name, then slices' taints by device, index."""
        if self.rule:
            return (0, self.rule, "", "", "", 0)
        return (1, "", *self.device, self.index)


@dataclass(frozen=True, slots=True)
class Eviction:
    """When a pod (or claim) must go, and every taint that makes it go (in upstream's order)."""

    when: datetime
    reasons: tuple[TrackedTaint, ...]

    def joined(self, other: Eviction | None) -> Eviction:
        if other is None:
            return self
        reasons = {r.key + r.device: r for r in (*self.reasons, *other.reasons)}
        return Eviction(min(self.when, other.when), tuple(sorted(reasons.values(), key=TrackedTaint.order)))

    def text(self) -> str:
        return "; ".join(r.text() for r in self.reasons)

    def rule_uids(self) -> set[str]:
        return {r.rule_uid for r in self.reasons if r.rule}


def _selects(rule: DeviceTaintRuleDocument, device: DeviceID) -> bool:
    """upstream's `ruleMatchesDevice`: a rule without `deviceSelector` selects no device here."""
    return rule.selector is not None and rule.selector.matches(*device)


class DeviceTaints:
    """The `NoExecute` taints of devices: each device's own, in the pools' current generation, then one per
    DeviceTaintRule with that effect that selects it."""

    def __init__(self, pools: Iterable[Pool], rules: Iterable[DeviceTaintRuleDocument]) -> None:
        self._device: dict[DeviceID, tuple[TrackedTaint, ...]] = {}
        #: Every device of the pools: what a rule's status counts as published devices.
        self.published: list[DeviceID] = []
        self.pools: set[tuple[str, str]] = set()
        for pool in pools:
            self.pools.add((pool.driver, pool.name))
            for slice_ in pool.slices:
                for d in slice_.devices:
                    device = (pool.driver, pool.name, d.name)
                    self.published.append(device)
                    tracked = tuple(
                        TrackedTaint(t, device, slice=slice_.meta.name, index=i)
                        for i, t in enumerate(d.taints)
                        if t.effect == NO_EXECUTE
                    )
                    if tracked:
                        self._device[device] = tracked
        self.rules = sorted((r for r in rules if r.taint.effect == NO_EXECUTE), key=lambda r: r.meta.name)

    @property
    def empty(self) -> bool:
        """No `NoExecute` taint anywhere: nothing to evict."""
        return not self._device and not self.rules

    def of(self, device: DeviceID) -> Iterator[TrackedTaint]:
        yield from self._device.get(device, ())
        for rule in self.rules:
            if _selects(rule, device):
                yield TrackedTaint(rule.taint, device, rule=rule.meta.name, rule_uid=rule.meta.uid)

    def every(self) -> Iterator[TrackedTaint]:
        """Each taint once: every device's own, and every rule's (on no device in particular)."""
        for tracked in self._device.values():
            yield from tracked
        for rule in self.rules:
            yield TrackedTaint(rule.taint, ("", "", ""), rule=rule.meta.name, rule_uid=rule.meta.uid)


def claim_eviction(
    claim: ClaimDocument, taints: DeviceTaints, added: Callable[[TrackedTaint], datetime]
) -> Eviction | None:
    """upstream's `claimEvictionTime`: the earliest time a taint of the claim's devices that its results do
    not tolerate for good evicts its pods, or None. `added(taint)` is when the taint was added."""
    if claim.allocation is None:
        return None
    when: datetime | None = None
    reasons: dict[tuple[str, ...], TrackedTaint] = {}
    for result in claim.allocation.results:
        for tracked in taints.of((result.driver, result.pool, result.device)):
            seconds: list[int] = []
            forever = False
            for toleration in result.tolerations:
                if toleration.effect == NO_EXECUTE and tolerates(toleration, tracked.taint):
                    if toleration.toleration_seconds is None:
                        forever = True
                        break
                    seconds.append(max(0, toleration.toleration_seconds))
            if forever:
                continue
            due = added(tracked) + timedelta(seconds=min(seconds, default=0))
            reasons[tracked.key + tracked.device] = tracked
            when = due if when is None or due < when else when
    if when is None:
        return None
    return Eviction(when, tuple(sorted(reasons.values(), key=TrackedTaint.order)))


def pod_eviction(
    pod_uid: str,
    claims: Iterable[ClaimDocument],
    taints: DeviceTaints,
    added: Callable[[TrackedTaint], datetime],
) -> Eviction | None:
    """upstream's `podEvictionTime`: the earliest eviction of the pod's claims that are reserved for it."""
    eviction: Eviction | None = None
    for claim in claims:
        if not any(r.uid == pod_uid for r in claim.reserved_for or ()):
            continue  # not the pod the claim is for (upstream's IsReservedForPod)
        found = claim_eviction(claim, taints, added)
        if found is not None:
            eviction = found.joined(eviction)
    return eviction


@dataclass(frozen=True, slots=True)
class RuleCounts:
    """What a DeviceTaintRule's status counts."""

    #: Pods it is about to evict, and their namespaces (a `None` rule: pods it would evict).
    pending: int = 0
    namespaces: int = 0
    #: Pods it evicted since the daemon started.
    evicted: int = 0
    #: For a rule of effect `None`: the published devices and the allocated devices it selects.
    published: int = 0
    allocated: int = 0


def rule_condition(rule: DeviceTaintRuleDocument, counts: RuleCounts) -> tuple[str, str, str]:
    """The `EvictionInProgress` condition's status, reason and message for the rule, in upstream's words
    (`maybeUpdateRuleStatus`)."""
    effect = rule.taint.effect
    status, message = "False", ""
    if effect == NO_EXECUTE:
        if counts.pending:
            status, reason = "True", "PodsPendingEviction"
            message = (
                f"{_pods(counts.pending, 'needs', 'need')} to be evicted in {_namespaces(counts.namespaces)}."
            )
        else:
            reason = "Completed" if counts.evicted else "NotStarted"
    elif effect == "None":
        reason = "NoEffect"
        message = (
            f"{_counted(counts.published, 'published device')} selected. "
            f"{_counted(counts.allocated, 'allocated device')} selected. "
            f"{_pods(counts.pending, 'would be', 'would be')} evicted in "
            f"{_namespaces(counts.namespaces, end=' ')}if the effect was NoExecute. This information will "
            "not be updated again. Recreate the DeviceTaintRule to trigger an update."
        )
    else:
        reason = "OtherEffect"
        message = "Eviction only happens for the NoExecute effect."
    if counts.evicted:
        message += (
            " " if message else ""
        ) + f"{_counted(counts.evicted, 'pod')} evicted since starting the controller."
    return status, reason, message


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _pods(n: int, one: str, many: str) -> str:
    return f"1 pod {one}" if n == 1 else f"{n} pods {many}"


def _namespaces(n: int, end: str = "") -> str:
    return f"1 namespace{end}" if n == 1 else f"{n} different namespaces{end}"


def simulated(rule: DeviceTaintRuleDocument) -> DeviceTaintRuleDocument:
    """The rule as if its effect were `NoExecute` (what a `None` rule's status reports on)."""
    return replace(rule, taint=replace(rule.taint, effect=NO_EXECUTE))


def allocated_selected(rule: DeviceTaintRuleDocument, claims: Iterable[ClaimDocument]) -> int:
    """The allocated devices the rule selects (`countTaintedDevices`)."""
    return sum(
        _selects(rule, (r.driver, r.pool, r.device))
        for c in claims
        if c.allocation is not None
        for r in c.allocation.results
    )


def published_selected(rule: DeviceTaintRuleDocument, published: Sequence[DeviceID]) -> int:
    return sum(_selects(rule, d) for d in published)


def pods_by_rule(evictions: Mapping[str, tuple[str, Eviction]]) -> dict[str, set[tuple[str, str]]]:
    """rule UID -> (pod UID, namespace) of the pending evictions that name it (`countPendingPods`)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for uid, (namespace, eviction) in evictions.items():
        for rule_uid in eviction.rule_uids():
            out.setdefault(rule_uid, set()).add((uid, namespace))
    return out
