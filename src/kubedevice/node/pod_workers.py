"""The pod workers (the kubelet's SyncPod and SyncTerminatingPod): one pod's way from admission to
Running, and from its removal to gone. The only code that writes a pod's status.

Admission: the extended resources DRA meets are decided, devices are allocated for every container (each
plugin called one at a time in admission order, the checkpoint write shared by the pods allocated
meanwhile), then a pod with claims is scheduled by the control plane and prepared by the DRA manager, then
each container's run options. The control plane (`ControlPlane.schedule`) and the DRA manager
(`DynamicResources.prepare`, `.unprepare`) answer outcomes, and the status is written here from them, so
the walk goes one way: manifest -> device manager -> control plane -> DRA manager -> run options -> Running.

A pod with claims that cannot be prepared yet stays Pending with the reason and message of the outcome,
keeps its device-plugin devices, and tries again on any relevant change (manifests, ResourceSlices, a
driver's registration, a pod gone, a claim's device status) and at least every `dra_retry_period` (sooner
when its binding conditions time out). A removed one stays Terminating (not active, its device-plugin
devices released) until UnprepareResources succeeds, tried again when a DRA driver registers and at least
every `dra_retry_period`. A pod the device taint eviction controller evicts (`evict`) ends Failed with the
controller's condition, saved before its claims are unprepared and released the same way; it stays Failed
(a restart goes on releasing its claims) until its manifest changes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from kubedevice.controlplane.binding import BINDING_PENDING
from kubedevice.controlplane.plane import ControlPlane
from kubedevice.controlplane.taint_eviction import (
    DISRUPTION_TARGET,
    EVICTION_MESSAGE,
    EVICTION_REASON,
)
from kubedevice.dra import DRAError
from kubedevice.dra.errors import PREPARE_FAILED, UNPREPARE_FAILED
from kubedevice.durations import format_duration
from kubedevice.manager import DeviceManager, DeviceManagerError, RunContainerOptions
from kubedevice.node.admission import (
    PodRejected,
    allocate_pod,
    device_needs,
    start_containers,
    unknown_requests,
    wait_for_devices,
)
from kubedevice.node.conditions import PodCondition
from kubedevice.node.config import NodeConfig
from kubedevice.node.dynamic_resources import DynamicResources
from kubedevice.node.metrics import NodeMetrics
from kubedevice.node.pod_restore import pod_name
from kubedevice.node.pods import ADMISSION_ERROR_REASON, PodRecord, PodTable
from kubedevice.scheduler.explanation import RequestExplanation
from kubedevice.scheduler.request import SCHEDULER_ERROR, UNSCHEDULABLE
from kubedevice.tasks import Signal, cancel_and_wait, wait_any
from kubedevice.topology import TopologyManager
from kubedevice.wording import failure_line

__all__ = ["PodWorkers"]

log = logging.getLogger("kubedevice.node.daemon")


class PodWorkers:
    """Admits and terminates the pods of `pods`; `save_state()` writes the pod state file (the caller's),
    which a pod that no checkpoint shows running needs before it is reported Running."""

    def __init__(
        self,
        config: NodeConfig,
        manager: DeviceManager,
        topology: TopologyManager,
        pods: PodTable,
        metrics: NodeMetrics,
        control: ControlPlane,
        dynamic: DynamicResources,
        save_state: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        self.pods = pods
        self._manager = manager
        self._topology = topology
        self._metrics = metrics
        self._control = control
        self._dynamic = dynamic
        self._save_state = save_state
        #: resource -> done once the run options of the last pod that took its turn are (the next one's).
        self._last_start: dict[str, asyncio.Future[None]] = {}
        self._admissions: dict[str, asyncio.Task[None]] = {}
        self._waiting: set[str] = set()
        #: Pods admitted without devices whose Running state is being saved before it is reported.
        self.starting: set[str] = set()
        #: Fires when a pod is terminated: one waiting for its claims sees it is gone.
        self._terminated = Signal()
        #: Fires when a pod becomes Running (the eviction controller looks at it).
        self.running = Signal()
        #: Terminating and evicted pods whose claims are being unprepared and released.
        self._unprepares: dict[str, asyncio.Task[None]] = {}
        self._tidy_task: asyncio.Task[None] | None = None

    def sources_ready(self) -> None:
        """Every pod is known (the first manifest scan): the claim store brought in line with them and the
        restored cache, and the DRA manager's reconcile pass on."""
        self._control.reconcile(self.pods.uids(), self._dynamic.cache())
        self._dynamic.manager.sources_ready = True
        self._tidy_task = asyncio.create_task(self._tidy_loop(), name="dra claim state")
        for record in self.pods:
            if record.phase == "Failed" and record.reason == EVICTION_REASON and record.has_claims:
                # Evicted before the restart: what its claims still hold is released (again: idempotent).
                record.dra_pod = self._control.restored_view(record.pod, record.manifest.claims)
                self._release(record)

    async def stop(self) -> None:
        for task in list(self._admissions.values()):
            task.cancel()
        await asyncio.gather(*self._admissions.values(), return_exceptions=True)
        await cancel_and_wait(self._tidy_task, *self._unprepares.values())
        self._unprepares.clear()

    def terminate(self, record: PodRecord) -> asyncio.Task[None] | None:
        """The pod's manifest is gone. A task, done once its claims are unprepared, when it must stay
        Terminating until then (a claim entry lists it); None when it can go at once."""
        self.cancel(record.uid)
        self._terminated.fire()
        releasing = self._unprepares.get(record.uid)
        if releasing is not None:  # evicted, its claims still being released: it goes once they are
            record.terminating = True
            return releasing
        if record.has_claims and self._dynamic.needs_unprepare(record.uid):
            record.terminating = True
            return self._release(record)
        if record.has_claims:
            self._control.pod_gone(record.uid)
        return None

    def _release(self, record: PodRecord) -> asyncio.Task[None]:
        task = asyncio.create_task(self._unprepare(record), name=f"unprepare {pod_name(record.pod)}")
        self._unprepares[record.uid] = task
        return task

    async def _unprepare(self, record: PodRecord) -> None:
        """SyncTerminatingPod: UnprepareResources until it succeeds; then what its claims held goes (its
        reservations, its generated claims, the allocations only it held) and a removed pod is gone."""
        pod = record.dra_pod
        said = ""
        while self._dynamic.needs_unprepare(record.uid):
            registered = self._dynamic.registered.current()
            error = await self._dynamic.unprepare(pod)
            if error is None:
                break
            if error != said:
                stays = "stays Terminating" if record.terminating else "keeps its claims prepared"
                log.warning("pod %s/%s %s: %s", pod.namespace, pod.name, stays, error)
                said = error
            if record.terminating:  # an evicted pod keeps the eviction as its status
                record.reason, record.message = UNPREPARE_FAILED, error
            await wait_any([registered], self.config.dra_retry_period)
        gone = "it is gone" if record.terminating else "what they held is released"
        log.info("pod %s/%s (%s): its claims are unprepared; %s", pod.namespace, pod.name, pod.uid, gone)
        del self._unprepares[record.uid]
        self._control.pod_gone(record.uid)

    async def evict(self, record: PodRecord, detail: str, when: str) -> bool:
        """The device taint eviction controller's eviction (upstream deletes the pod; here its manifest
        stays): the pod gets the controller's DisruptionTarget condition and ends Failed with its reason and
        message (`detail`: the taints), its containers stop (not active: its devices are freed), the state
        file keeps it Failed, then its claims are unprepared and released. False when it is not Running
        any more."""
        if self.pods.get(record.uid) is not record or record.phase != "Running" or record.terminating:
            return False
        condition = PodCondition(DISRUPTION_TARGET, "True", EVICTION_REASON, EVICTION_MESSAGE, when)
        record.phase, record.reason, record.message = "Failed", EVICTION_REASON, EVICTION_MESSAGE
        record.detail, record.conditions, record.run_options = detail, (condition,), {}
        self._topology.remove_pod(record.uid)
        self.release()
        log.warning("pod %s evicted (%s): %s", pod_name(record.pod), EVICTION_REASON, detail)
        # Saved before anything is undone: a restart never admits it again, and finishes the release.
        await self._save_state()
        if record.has_claims and self._unprepares.get(record.uid) is None:
            self._release(record)
        return True

    def release(self) -> None:
        self._manager.update_allocated_devices(self.pods.active_uids())

    def cancel(self, uid: str) -> None:
        # Only a pod still waiting for devices is cancelled; an admission under way finishes, then the
        # pod's devices are garbage-collected like any terminated pod's.
        task = self._admissions.get(uid)
        if task is not None and uid in self._waiting:
            task.cancel()

    def admit(self, record: PodRecord) -> None:
        task = asyncio.create_task(self._run(record), name=f"admit {pod_name(record.pod)}")
        self._admissions[record.uid] = task
        task.add_done_callback(functools.partial(self._admission_done, record.uid))

    def _admission_done(self, uid: str, task: asyncio.Task[None]) -> None:
        if self._admissions.get(uid) is task:
            del self._admissions[uid]
        if not task.cancelled() and task.exception() is not None:
            log.error("admission of pod %s crashed", uid, exc_info=task.exception())

    async def _run(self, record: PodRecord) -> None:
        manager = self._manager
        releasing = self._unprepares.get(record.uid)
        if releasing is not None:  # evicted, then its manifest changed: its old claims go first
            await asyncio.wait([releasing])
        # Which extended resources DRA meets is decided first: the device manager never sees those.
        plugin_resources = {r.resource_name for r in manager.registered_resources()}
        record.routes = self._control.extended_routes(record.pod, plugin_resources)
        if self.config.admission_wait > 0:
            self._waiting.add(record.uid)
            try:
                missing = await wait_for_devices(manager, record.device_pod, self.config.admission_wait)
            finally:
                self._waiting.discard(record.uid)
            if missing:
                log.info(
                    "pod %s waited %s; still missing: %s",
                    pod_name(record.pod),
                    format_duration(self.config.admission_wait),
                    "; ".join(f"{r}: {why}" for r, why in missing.items()),
                )
        needs = sorted(device_needs(record.device_pod))
        options: dict[str, RunContainerOptions | None] | None = None
        # Pods sharing a resource call its plugin one at a time, in admission order: Allocate in the
        # resource's turn, which passes to the next pod once this pod's last Allocate on it is on its way
        # (the next pod picks its devices while it runs); PreStartContainer once the pods that had the turn
        # before are started. The checkpoint write in between is shared by the pods allocated meanwhile
        # (group commit), so it overlaps the next pods' Allocate.
        started = asyncio.get_running_loop().create_future()
        before: list[asyncio.Future[None]] = []
        try:
            async with manager.plugin_turns.hold(record.uid, needs):
                if not self._pending(record):
                    return
                # Calls follow the order of the turns: so does the run options' order.
                before = [f for r in needs if (f := self._last_start.get(r)) is not None and not f.done()]
                self._last_start.update(dict.fromkeys(needs, started))
                record.warnings = await allocate_pod(self._topology, manager, record.device_pod)
            if needs:
                await manager.write_checkpoint()
            prepared = not record.has_claims or await self._prepare_claims(record, started)
            if prepared and record.manifest.claims:
                record.warnings += unknown_requests(record.dra_pod, self._control.claims.claim)
            if before:
                await asyncio.wait(before)  # never cancels them, even when this admission is
            if prepared and self._pending(record):
                options = await start_containers(manager, record.device_pod)
                if record.has_claims:
                    options = self._dynamic.run_options(record.dra_pod, options)
        except PodRejected as err:
            self.fail(record, err.message, err.reason, err.detail)
        except (DeviceManagerError, DRAError) as err:
            self.fail(record, str(err))
        finally:
            if not started.done():
                started.set_result(None)
        if options is not None:
            record.run_options = options
            if (
                not self._dynamic.prepared_on_record(record.dra_pod)
                if record.has_claims
                else all(o is None for o in options.values())
            ):
                # No checkpoint entry says it runs: save that before anyone is told it does.
                self.starting.add(record.uid)
                try:
                    await self._save_state()
                finally:
                    self.starting.discard(record.uid)
            record.phase = "Running"
            self._metrics.admissions.inc()
            log.info("pod %s admitted: Running", pod_name(record.pod))
            self.running.fire()
        if self.pods.get(record.uid) is not record or not record.active:
            self.release()  # removed while admitting, or failed part-way: free what it got
        if not record.active:
            # A Running pod was saved above or is in the checkpoint; a removed pod was saved by the scan
            # that removed it; a pod that ended Failed is saved now.
            await self._save_state()

    def _pending(self, record: PodRecord) -> bool:
        """Still in the table and waiting for its admission (not removed nor finished meanwhile)."""
        return self.pods.get(record.uid) is record and record.phase == "Pending" and not record.terminating

    async def _prepare_claims(self, record: PodRecord, started: asyncio.Future[None]) -> bool:
        """The pod's claims scheduled by the control plane, then prepared by the DRA manager, tried until
        they are (True) or the pod left (False). While it waits, `started` is set: the pods after it on its
        device-plugin resources do not wait for it."""
        control, dynamic = self._control, self._dynamic
        while True:
            changes = [control.changed.current(), dynamic.registered.current(), self._terminated.current()]
            if not self._pending(record):
                break
            retry_at: datetime | None = None
            try:
                prepared, retry_at = await self._schedule_and_prepare(record)
            except Exception as err:
                # A fault in the DRA step (the search, the stores, a driver's answer) must not end the
                # admission: as the scheduler does with an internal error, the pod waits with the error
                # as its message and is tried again. The traceback is for debugging only.
                log.debug("the DRA step of pod %s failed", pod_name(record.pod), exc_info=True)
                self._wait(record, SCHEDULER_ERROR, f"internal error in the DRA step: {failure_line(err)}")
                prepared = False
            if prepared:
                if record.reason in (PREPARE_FAILED, UNSCHEDULABLE, SCHEDULER_ERROR, BINDING_PENDING):
                    record.reason, record.message, record.detail = "", "", ""
                record.explanation = ()
                break
            if not started.done():
                started.set_result(None)
            await wait_any(changes, self._retry_delay(retry_at))
        if self._pending(record):
            return True
        if dynamic.needs_unprepare(record.uid):
            dynamic.reconcile_soon()  # removed while its prepare ran: what it recorded is unprepared
        return False

    async def _schedule_and_prepare(self, record: PodRecord) -> tuple[bool, datetime | None]:
        """One try of the pod's claims: scheduled, then prepared (True), or the pod waits (False, and when
        to try again at the latest: its binding timeout)."""
        control, dynamic = self._control, self._dynamic
        scheduled = control.schedule(record.pod, record.manifest.claims, record.routes, dynamic.cache())
        record.dra_pod = scheduled.pod
        waiting = scheduled.waiting
        if waiting is not None:
            self._wait(record, waiting.reason, waiting.message, waiting.detail, waiting.explanation)
            return False, scheduled.retry_at
        error = await dynamic.prepare(scheduled.pod)
        if error is not None:
            self._wait(record, PREPARE_FAILED, error)
            return False, None
        return True, None

    def _retry_delay(self, retry_at: datetime | None) -> float:
        """How long a waiting pod sleeps when nothing changes: the retry period, or until just past its
        binding timeout (the timestamps are whole seconds; the deadline counts once passed)."""
        period = self.config.dra_retry_period
        if retry_at is None:
            return period
        return min(period, max(0.0, (retry_at - self._control.clock()).total_seconds()) + 0.01)

    def _wait(
        self,
        record: PodRecord,
        reason: str,
        message: str,
        detail: str = "",
        explanation: tuple[RequestExplanation, ...] = (),
    ) -> None:
        """The pod stays Pending: why, said in the log when it changed (with, at debug level, what ruled
        each request's devices out)."""
        if record.message != message:
            log.warning("pod %s waits: %s", pod_name(record.pod), message)
            for request in explanation:
                log.debug("pod %s waits: %s", pod_name(record.pod), request.text())
        record.reason, record.message, record.detail = reason, message, detail
        record.explanation = explanation

    async def _tidy_loop(self) -> None:
        """The DRA manager's reconcile pass, then the claim store brought in line with what it unprepared
        (reservations of pods gone, their generated claims, the allocations they held): now (the first
        scan), whenever a DRA driver registers, and every reconcile period."""
        while True:
            registered = self._dynamic.registered.current()
            try:
                await self._dynamic.manager.reconcile()
            except Exception:
                log.exception("DRA reconcile pass failed")
            self._control.reconcile(self.pods.uids(), self._dynamic.cache())
            await wait_any([registered], self.config.dra_reconcile_period)

    def fail(
        self, record: PodRecord, message: str, reason: str = ADMISSION_ERROR_REASON, detail: str = ""
    ) -> None:
        record.phase, record.reason, record.message, record.detail = "Failed", reason, message, detail
        record.run_options = {}
        self._topology.remove_pod(record.uid)
        self._metrics.admission_failures.inc()
        log.warning("pod %s failed admission: %s", pod_name(record.pod), message)
        if detail:
            log.info("pod %s: %s because %s", pod_name(record.pod), reason, detail)
