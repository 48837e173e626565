"""The device taint eviction controller (`pkg/controller/devicetainteviction`) on the node's own pods.

One task follows the pods that run with claims. Whenever the DRA documents or the ResourceSlices change
(a DeviceTaintRule written or removed, a driver's taint published or cleared), a claim's status changes, or
a pod starts, it works out when each pod must go (controlplane.taint_eviction: the `NoExecute` taints of
its allocated devices its results do not tolerate, after their `tolerationSeconds`); a pod whose time has
come is evicted through the pod workers (node.pod_workers: `evict`), the only writer of a pod's status.
In between it sleeps until the next deadline or the next change, never polling. A taint or rule removed
before the deadline cancels the countdown (said in the log, as upstream's `Cancelling deletion` event).

The countdowns count from each taint's `timeAdded` or its durable first sighting (controlplane.taint_times,
committed before anything counts from it), so a restart goes on with the same deadlines, and an evicted
pod is Failed in the state file, so it is never evicted twice.

Also the DeviceTaintRules' status (`EvictionInProgress`, as `maybeUpdateRuleStatus` writes it) and each
pod's pending eviction, for the status API; evictions are counted in upstream's metrics.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from kubedevice.controlplane.plane import ControlPlane
from kubedevice.controlplane.taint_eviction import (
    RULE_CONDITION,
    DeviceTaints,
    Eviction,
    RuleCounts,
    allocated_selected,
    pod_eviction,
    pods_by_rule,
    published_selected,
    rule_condition,
    simulated,
)
from kubedevice.dra import DRAError
from kubedevice.dra.claim_names import pod_claim_names
from kubedevice.node.metrics import NodeMetrics
from kubedevice.node.pod_restore import pod_name
from kubedevice.node.pods import PodRecord, PodTable
from kubedevice.resource.model import ClaimDocument, DeviceTaintRuleDocument
from kubedevice.resource.times import metav1_time
from kubedevice.tasks import Signal, cancel_and_wait, wait_any

__all__ = ["TaintEvictionController"]

log = logging.getLogger("kubedevice.node.daemon")

#: The longest sleep between passes when nothing changes (a clock that jumps is caught up with).
_MAX_SLEEP_S = 60.0

Evict = Callable[[PodRecord, str, str], Awaitable[bool]]


class TaintEvictionController:
    """Evicts the pods of `pods` whose devices get a `NoExecute` taint they do not tolerate."""

    def __init__(
        self,
        control: ControlPlane,
        pods: PodTable,
        evict: Evict,
        started: Signal,
        metrics: NodeMetrics,
    ) -> None:
        self._control = control
        self._pods = pods
        self._evict = evict
        self._started = started
        self._metrics = metrics
        #: pod UID -> (namespace, its pending eviction).
        self.pending: dict[str, tuple[str, Eviction]] = {}
        #: rule UID -> pods it evicted since the daemon started.
        self._evicted: Counter[str] = Counter()
        #: A `None` rule's simulated counts, made once per rule object (upstream sets them once per spec).
        self._simulations: dict[tuple[str, str], RuleCounts] = {}
        #: rule UID -> its condition and when it last changed.
        self._conditions: dict[str, tuple[tuple[str, str, str], str]] = {}
        #: The last slices' pools and rules, and their taints.
        self._taints: tuple[object, object, DeviceTaints] | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="device taint eviction")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            wake = [self._control.changed.current(), self._started.current()]
            try:
                delay = await self.sync()
            except Exception:
                log.exception("the device taint eviction pass failed; tried again at the next change")
                delay = _MAX_SLEEP_S
            await wait_any(wake, delay)

    async def sync(self) -> float:
        """One pass: the taints' first sightings recorded, the pods due evicted, the others' countdowns
        kept. Returns how long until the next deadline (at most a minute)."""
        control = self._control
        now = control.clock()
        taints = self._device_taints()
        times = control.taint_times
        if times.observe(taints.every(), taints.pools, now):
            try:
                await times.commit()  # durable before any countdown counts from it
            except Exception as err:
                log.error("cannot write %s: %s (a restart would count from later)", times.path, err)
        pending = self._countdowns(taints) if not taints.empty else {}
        for uid in self.pending.keys() - pending.keys():
            gone = self._pods.get(uid)
            if gone is not None and gone.phase == "Running":
                log.info("pod %s: eviction cancelled (the taint is gone or tolerated)", pod_name(gone.pod))
        delay = _MAX_SLEEP_S
        for uid, (_, eviction) in list(pending.items()):
            record = self._pods.get(uid)
            if record is None:
                continue
            if uid not in self.pending or self.pending[uid][1] != eviction:
                when = metav1_time(eviction.when)
                log.info("pod %s will be evicted at %s: %s", pod_name(record.pod), when, eviction.text())
            left = (eviction.when - now).total_seconds()
            if left > 0:
                delay = min(delay, left)
                continue
            del pending[uid]
            if await self._evict(record, f"evicted for the taint {eviction.text()}", metav1_time(now)):
                self._metrics.pod_deletions.inc()
                self._metrics.pod_deletion_duration.observe(-left)
                self._evicted.update(eviction.rule_uids())
        self.pending = pending
        return delay

    def _device_taints(self) -> DeviceTaints:
        """The devices' NoExecute taints, made again only when the slices or the rules changed (each is
        replaced whole when it changes): a pass for a pod that starts costs nothing then."""
        pools, rules = self._control.slices.pools(), self._control.documents.taint_rules
        if self._taints is None or self._taints[0] is not pools or self._taints[1] is not rules:
            self._taints = (pools, rules, DeviceTaints(pools, rules.values()))
        return self._taints[2]

    def _countdowns(self, taints: DeviceTaints) -> dict[str, tuple[str, Eviction]]:
        """pod UID -> (namespace, its eviction) for every running pod a taint evicts."""
        pending: dict[str, tuple[str, Eviction]] = {}
        for record in self._pods:
            eviction = self._pod_eviction(record, taints)
            if eviction is not None:
                pending[record.uid] = (record.pod.namespace, eviction)
        return pending

    def _pod_eviction(self, record: PodRecord, taints: DeviceTaints) -> Eviction | None:
        if record.phase != "Running" or record.terminating or not record.has_claims:
            return None
        return pod_eviction(record.uid, self._claims(record), taints, self._control.taint_times.added)

    def _claims(self, record: PodRecord) -> list[ClaimDocument]:
        pod = record.dra_pod
        try:
            names = pod_claim_names(pod)
        except DRAError:
            return []
        found = (self._control.claims.claim(pod.namespace, n.claim_name) for n in names)
        return [c for c in found if c is not None]

    # --- views ---

    def pod_views(self) -> dict[str, dict[str, Any]]:
        """pod UID -> its pending eviction: `{"at": <RFC 3339>, "taints": [...]}`."""
        return {
            uid: {"at": metav1_time(e.when), "taints": [r.text() for r in e.reasons]}
            for uid, (_, e) in self.pending.items()
        }

    def rules_view(self) -> list[dict[str, Any]]:
        """Every DeviceTaintRule with its status, as the API server would show it (v1)."""
        control = self._control
        rules = sorted(control.documents.taint_rules.values(), key=lambda r: r.meta.name)
        by_rule = pods_by_rule(self.pending)
        now = metav1_time(control.clock())
        out = []
        for rule in rules:
            uid = rule.meta.uid
            if rule.taint.effect == "None":
                counts = self._simulation(rule)
            else:
                pods = by_rule.get(uid, set())
                counts = RuleCounts(len(pods), len({ns for _, ns in pods}), self._evicted[uid])
            counts = RuleCounts(
                counts.pending, counts.namespaces, self._evicted[uid], counts.published, counts.allocated
            )
            condition = rule_condition(rule, counts)
            old = self._conditions.get(uid)
            since = old[1] if old is not None and old[0] == condition else now
            self._conditions[uid] = (condition, since)
            out.append(_rule_json(rule, condition, since))
        return out

    def _simulation(self, rule: DeviceTaintRuleDocument) -> RuleCounts:
        key = (rule.meta.uid, repr((rule.taint, rule.selector)))
        found = self._simulations.get(key)
        if found is not None:
            return found
        control = self._control
        evicting = simulated(rule)
        taints = DeviceTaints(control.slices.pools(), [evicting])
        pods: set[tuple[str, str]] = set()
        for record in self._pods:
            eviction = self._pod_eviction(record, taints)
            if eviction is not None and rule.meta.uid in eviction.rule_uids():
                pods.add((record.uid, record.pod.namespace))
        counts = RuleCounts(
            pending=len(pods),
            namespaces=len({ns for _, ns in pods}),
            published=published_selected(rule, taints.published),
            allocated=allocated_selected(rule, control.claims.claims()),
        )
        self._simulations[key] = counts
        return counts


def _rule_json(rule: DeviceTaintRuleDocument, condition: tuple[str, str, str], since: str) -> dict[str, Any]:
    status, reason, message = condition
    spec: dict[str, Any] = {"taint": rule.taint.to_json()}
    if rule.selector is not None:
        spec["deviceSelector"] = rule.selector.to_json()
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": rule.meta.name, "uid": rule.meta.uid},
        "spec": spec,
        "status": {
            "conditions": [
                {
                    "type": RULE_CONDITION,
                    "status": status,
                    "lastTransitionTime": since,
                    "reason": reason,
                    "message": message,
                }
            ]
        },
        "file": rule.meta.source,
    }
