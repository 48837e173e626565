"""The pod flow's DRA step: claims prepared between admission and the containers' start, unprepared before
a removed pod goes (the kubelet's SyncPod and SyncTerminatingPod around its DRA manager).

A pod with claims is admitted by the device manager first; then the daemon, as claim controller and
scheduler, decides its DRA step (node.dra.dra_step: claims generated from templates, allocated, reserved;
recorded in `dra_claims.json`), and the DRA manager prepares them. A failure does not fail the pod: it
stays Pending, keeps its
device-plugin devices and tries again on any relevant change (manifests, ResourceSlices, a driver's
registration) and at least every `retry_period`. Once prepared, each container's run options get the DRA
CDI IDs before the device manager's. A pod whose manifest is removed while a claim entry lists it is
Terminating (not active, its device-plugin devices released) until UnprepareResources succeeds; a failure
is retried when a DRA driver registers and at least every `retry_period` (more often than the kubelet's
reconcile pass, which the DRA manager runs too). Pods without claims never come here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from typing import overload

from kubedevice.checkpoint.dra_model import ClaimInfoState
from kubedevice.controlplane.claim_saver import ClaimStoreSaver
from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore, ClaimStoreFile, reconcile_at_start
from kubedevice.controlplane.claim_view import ClaimView
from kubedevice.controlplane.extended import ExtendedRoutes, coexistence_warnings, route_extended_resources
from kubedevice.controlplane.pod_step import DRAContext, dra_step, recorded_routes, restore_pod
from kubedevice.controlplane.reservation import pod_removed
from kubedevice.dra import DRAManager, DynamicResource, PrepareError, UnprepareError
from kubedevice.dra import types as dra
from kubedevice.manager import RunContainerOptions
from kubedevice.node.pods import PodRecord
from kubedevice.pluginwatcher import PluginHandler
from kubedevice.resource.model import DRADocuments, Pool
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.tasks import cancel_and_wait

log = logging.getLogger("kubedevice.node.daemon")

#: The kubelet's event reasons, shown as the pod's status reason.
PREPARE_FAILED = "FailedPrepareDynamicResources"
UNPREPARE_FAILED = "FailedUnprepareDynamicResources"
#: The scheduler's reason: a claim cannot be reserved for one more pod.
UNSCHEDULABLE = "Unschedulable"


class Signal:
    """Wakes every waiter at once, each time it fires; a waiter that took `current()` before a fire wakes
    even if it starts waiting after it."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def current(self) -> asyncio.Event:
        return self._event

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()


async def wait_for(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


class RegistrationTap:
    """The DRA manager's plugin handler, telling the flow of each driver that registered."""

    def __init__(self, inner: PluginHandler, on_registered: Callable[[str], None]) -> None:
        self._inner = inner
        self._on_registered = on_registered

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        self._inner.validate_plugin(name, endpoint, versions)

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        await self._inner.register_plugin(name, endpoint, versions)
        self._on_registered(name)

    async def deregister_plugin(self, name: str, endpoint: str) -> None:
        await self._inner.deregister_plugin(name, endpoint)


def has_claims(record: PodRecord) -> bool:
    """The pod has claims: in its manifest, or the special claim of its DRA-backed extended resources."""
    return bool(record.manifest.claims) or bool(record.routes)


class DRAFlow:
    """Prepares the claims of admitted pods and unprepares those of removed pods, on one DRA manager.

    `on_gone(record)` is called once a Terminating pod's claims are unprepared: the caller forgets it.
    """

    on_gone: Callable[[PodRecord], None] | None = None
    #: The DRA manager, given once it is made (it reads its claims from `claims`).
    manager: DRAManager

    def __init__(
        self,
        state: ClaimStore,
        state_file: ClaimStoreFile,
        *,
        node_name: str,
        pools: Callable[[], Sequence[Pool]],
        known_pods: Callable[[], Collection[str]],
        retry_period: float,
        reconcile_period: float,
    ) -> None:
        self.state = state
        self._saver = ClaimStoreSaver(state, state_file)
        self._node_name = node_name
        self._pools = pools
        self._known_pods = known_pods
        self._reconcile_period = reconcile_period
        self._tidy_task: asyncio.Task[None] | None = None
        #: The last manifest scan's DRA documents.
        self.documents = DRADocuments()
        #: The claims as an API server shows them: the DRA manager's ClaimSource.
        self.claims = ClaimView(lambda: self.documents, state)
        #: Compile selectors as the manifests are read, and evaluate them in allocations (one cache).
        self.selectors = CelSelectors()
        self._retry_period = retry_period
        self._changed = Signal()
        self._registered = Signal()
        self._terminating: dict[str, asyncio.Task[None]] = {}
        #: Each pod's DRA view (its generated claims' names, its special claim) from its last step.
        self._pods: dict[str, dra.DRAPod] = {}

    def dra_pod(self, record: PodRecord) -> dra.DRAPod:
        """The pod as the DRA manager sees it."""
        return self._pods.get(record.uid) or record.manifest.dra_pod()

    def update_documents(self, documents: DRADocuments) -> None:
        """A scan's DRA documents; pods waiting for their claims try again when they changed."""
        if documents is not self.documents:
            self.documents = documents
            self._changed.fire()

    def _apply(self, updates: Mapping[str, ClaimRecord | None]) -> bool:
        """Apply a decision to the claim state (saved in order, on a thread); True when it changed."""
        return self._saver.apply(updates)

    def _release(self, uid: str) -> None:
        """The pod is gone (unprepared, or never prepared): its reservations and generated claims go."""
        if self._apply(pod_removed(self.state, uid)):
            self._changed.fire()  # its devices may be free again
        self._pods.pop(uid, None)

    def plugin_handler(self) -> PluginHandler:
        """The DRA manager's handler for the plugins_registry watcher, which also wakes waiting pods."""
        return RegistrationTap(self.manager.plugin_handler, self._driver_registered)

    def _driver_registered(self, driver: str) -> None:
        self._registered.fire()
        self._changed.fire()

    def changed(self) -> None:
        """Something a waiting pod may be waiting for changed (claims, slices, a pod gone): try again."""
        self._changed.fire()

    def decide_routes(self, record: PodRecord, plugin_resources: Set[str]) -> None:
        """At admission: which of the pod's extended resources DRA meets. A decision recorded for the pod
        (its special claim in dra_claims.json) stands; else a registered device plugin, then a DeviceClass
        mapping the name, decide now (`plugin_resources`: the names registered with the device manager)."""
        routes = recorded_routes(self.state, record.pod)
        if routes is None:
            routes = route_extended_resources(record.pod, plugin_resources, self.documents)
            pod = record.pod
            for name, device_class in sorted(routes.dra.items()):
                log.info(
                    "pod %s/%s (%s): %s is met by DRA through DeviceClass %s (no device plugin for it)",
                    pod.namespace,
                    pod.name,
                    pod.uid,
                    name,
                    device_class,
                )
        record.routes = routes

    def restore_routes(self, record: PodRecord) -> None:
        """At start: the decision recorded for the pod, if any (it never flips)."""
        routes = recorded_routes(self.state, record.pod)
        if routes:
            record.routes = routes

    def coexistence_warnings(self, plugin_resources: Iterable[str]) -> list[str]:
        """Names offered by a registered device plugin and by a DeviceClass: the device plugin serves them."""
        return coexistence_warnings(plugin_resources, self.documents)

    def restore(self, record: PodRecord) -> None:
        """A pod running before the restart: its DRA view (generated claims, special claim) comes back
        from the claim state, nothing decided anew."""
        result = restore_pod(record.pod, record.manifest.claims, self.state, self.documents)
        self._apply(result.updates)
        self._pods[record.uid] = result.pod

    def prepared_on_record(self, record: PodRecord) -> bool:
        """The DRA checkpoint alone shows the pod's claims prepared for it (DRAManager.prepared_on_record):
        a restart knows from that that it ran, as it knows a pod with a device checkpoint entry did."""
        pod = self._pods.get(record.uid)
        if pod is None:  # at start, before any step: the view a restore would rebuild
            pod = restore_pod(record.pod, record.manifest.claims, self.state, self.documents).pod
        return self.manager.prepared_on_record(pod)

    def sources_ready(self, records: Iterable[PodRecord]) -> None:
        """Every pod is known (the first manifest scan): the claim state brought in line with the
        manifests and the restored cache, and the DRA manager's reconcile pass on."""
        cache = [s for s, _prepared in self.manager.claim_infos()]
        self._apply(reconcile_at_start(self.state, self.documents, [r.uid for r in records], cache))
        self.manager.sources_ready = True
        self._tidy_task = asyncio.create_task(self._tidy_loop(), name="dra claim state")

    async def _tidy_loop(self) -> None:
        """The DRA manager's reconcile pass, then the claim state brought in line with what it unprepared
        (reservations of pods gone, their generated claims, the allocations they held): now (the first
        scan), whenever a DRA driver registers, and every reconcile period."""
        while True:
            registered = self._registered.current()
            try:
                await self.manager.reconcile()
            except Exception:
                log.exception("DRA reconcile pass failed")
            cache = [s for s, _prepared in self.manager.claim_infos()]
            known = set(self._known_pods())
            if self._apply(reconcile_at_start(self.state, self.documents, known, cache)):
                self._changed.fire()  # devices may be free again
            await wait_for(registered, self._reconcile_period)

    async def stop(self) -> None:
        await cancel_and_wait(self._tidy_task, *self._terminating.values())
        self._terminating.clear()
        await self._saver.stop()

    # --- preparing ---

    async def prepare(self, record: PodRecord) -> bool:
        """One try: the pod's DRA step (claims generated, allocated, reserved), then PrepareResources. On
        failure the pod's reason and message say why (it stays Pending); on success they are cleared."""
        context = DRAContext(
            documents=self.documents,
            pools=self._pools(),
            node_name=self._node_name,
            cache=_CacheOnDemand(self.manager),
            selectors=self.selectors,
        )
        routes = record.routes or ExtendedRoutes()
        step = dra_step(record.pod, record.manifest.claims, routes, self.state, context)
        self._apply(step.updates)
        self._pods[record.uid] = step.pod
        if step.waiting is not None:
            _waiting(record, step.waiting.reason, step.waiting.message, step.waiting.detail)
            return False
        try:
            await self.manager.prepare_resources(step.pod)
        except PrepareError as err:
            _waiting(record, PREPARE_FAILED, f"Failed to prepare dynamic resources: {err}")
            return False
        if record.reason in (PREPARE_FAILED, UNSCHEDULABLE):
            record.reason, record.message, record.detail = "", "", ""
        return True

    async def until_prepared(
        self, record: PodRecord, still_wanted: Callable[[], bool], waiting: asyncio.Future[None]
    ) -> bool:
        """Try until the pod's claims are prepared (True) or `still_wanted()` is False (False); `waiting`
        gets its result before the first wait."""
        while True:
            change = self._changed.current()
            if not still_wanted():
                return False
            if await self.prepare(record):
                return True
            if not waiting.done():
                waiting.set_result(None)
            await wait_for(change, self._retry_period)

    def run_options(
        self, record: PodRecord, options: dict[str, RunContainerOptions | None]
    ) -> dict[str, RunContainerOptions | None]:
        """Each container's run options with its DRA CDI IDs first, then the device manager's, each ID
        once. Raises DRAError when a claim of the pod is not in the DRA manager's cache."""
        pod = self.dra_pod(record)
        out: dict[str, RunContainerOptions | None] = {}
        for name, opts in options.items():
            container = pod.container(name)
            ids = self.manager.get_resources(pod, container) if container is not None else []
            if not ids:
                out[name] = opts
                continue
            base = opts if opts is not None else RunContainerOptions()
            out[name] = dataclasses.replace(base, cdi_devices=list(dict.fromkeys([*ids, *base.cdi_devices])))
        return out

    def dynamic_resources(self, record: PodRecord, container: str) -> list[DynamicResource]:
        """PodResources' `dynamic_resources` of one container: empty for a pod without claims, and for a
        pod still waiting for them (the kubelet finds no claim info either, and would log so each time)."""
        if not has_claims(record) or record.phase == "Pending":
            return []
        pod = self.dra_pod(record)
        c = pod.container(container)
        return self.manager.get_dynamic_resources(pod, c) if c is not None else []

    # --- terminating ---

    def terminate(self, record: PodRecord) -> bool:
        """The pod's manifest is gone. True when it must stay, Terminating, until its claims are unprepared
        (a claim entry lists it); False when it can go at once (its reservations are dropped)."""
        if record.uid in self._terminating:
            return True
        self._changed.fire()  # a pod waiting for its claims sees it is gone
        if not (has_claims(record) and self.manager.pod_might_need_to_unprepare_resources(record.uid)):
            self._release(record.uid)
            return False
        record.terminating = True
        self._terminating[record.uid] = asyncio.create_task(
            self._unprepare(record), name=f"unprepare {record.pod.namespace}/{record.pod.name}"
        )
        return True

    async def _unprepare(self, record: PodRecord) -> None:
        pod = self.dra_pod(record)
        while True:
            registered = self._registered.current()
            try:
                await self.manager.unprepare_resources(pod)
                break
            except UnprepareError as err:
                if record.message != str(err):
                    log.warning("pod %s/%s stays Terminating: %s", pod.namespace, pod.name, err)
                record.reason, record.message = UNPREPARE_FAILED, str(err)
            await wait_for(registered, self._retry_period)
        log.info("pod %s/%s (%s): its claims are unprepared; it is gone", pod.namespace, pod.name, pod.uid)
        self._terminating.pop(record.uid, None)
        self._release(record.uid)
        self._changed.fire()
        if self.on_gone is not None:
            self.on_gone(record)

    def forget_unprepared(self, uid: str) -> bool:
        """A pod removed while its prepare ran: the reconcile pass unprepares what the prepare recorded.
        Returns False (the pod is not to be started)."""
        if self.manager.pod_might_need_to_unprepare_resources(uid):
            task = asyncio.create_task(self.manager.reconcile(), name="dra reconcile")
            task.add_done_callback(_log_failure)
        return False


def _waiting(record: PodRecord, reason: str, message: str, detail: str = "") -> None:
    if record.message != message:
        pod = record.pod
        log.warning("pod %s/%s (%s) waits: %s", pod.namespace, pod.name, pod.uid, message)
    record.reason, record.message, record.detail = reason, message, detail


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("DRA reconcile pass failed", exc_info=task.exception())


class _CacheOnDemand(Sequence[ClaimInfoState]):
    """The DRA manager's claim-info cache, copied when the DRA step first reads it (only an allocation
    does): the copy costs O(claims), which a burst of pods with allocated claims would pay per pod."""

    def __init__(self, manager: DRAManager) -> None:
        self._manager = manager
        self._states: list[ClaimInfoState] | None = None

    def _now(self) -> list[ClaimInfoState]:
        if self._states is None:
            self._states = [s for s, _prepared in self._manager.claim_infos()]
        return self._states

    @overload
    def __getitem__(self, index: int) -> ClaimInfoState: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ClaimInfoState]: ...

    def __getitem__(self, index: int | slice) -> ClaimInfoState | Sequence[ClaimInfoState]:
        return self._now()[index]

    def __len__(self) -> int:
        return len(self._now())
