"""The pod flow's DRA step: claims prepared between admission and the containers' start, unprepared before
a removed pod goes (the kubelet's SyncPod and SyncTerminatingPod around its DRA manager).

A pod with claims is admitted by the device manager first; then the daemon, as scheduler, reserves its
claims, and the DRA manager prepares them. A failure does not fail the pod: it stays Pending, keeps its
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
from collections.abc import Callable, Iterable, Sequence

from kubedevice.dra import DRAManager, DynamicResource, PrepareError, UnprepareError
from kubedevice.dra import types as dra
from kubedevice.manager import RunContainerOptions
from kubedevice.node.dra.claim_store import ClaimStore, ReservationError
from kubedevice.node.dra.model import SelectorCompiler
from kubedevice.node.pods import PodRecord
from kubedevice.pluginwatcher import PluginHandler

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
    return bool(record.manifest.claims)


def dra_pod(record: PodRecord) -> dra.Pod:
    """The pod as the DRA manager sees it."""
    return record.manifest.dra_pod()


class DRAFlow:
    """Prepares the claims of admitted pods and unprepares those of removed pods, on one DRA manager.

    `on_gone(record)` is called once a Terminating pod's claims are unprepared: the caller forgets it.
    """

    on_gone: Callable[[PodRecord], None] | None = None

    def __init__(
        self,
        manager: DRAManager,
        claims: ClaimStore,
        *,
        retry_period: float,
        selectors: SelectorCompiler | None = None,
    ) -> None:
        self.manager = manager
        self.claims = claims
        #: Checks the CEL selectors of claims, templates and classes as the manifests are read.
        self.selectors = selectors
        self._retry_period = retry_period
        self._changed = Signal()
        self._registered = Signal()
        self._terminating: dict[str, asyncio.Task[None]] = {}

    def plugin_handler(self) -> PluginHandler:
        """The DRA manager's handler for the plugins_registry watcher, which also wakes waiting pods."""
        return RegistrationTap(self.manager.plugin_handler, self._driver_registered)

    def _driver_registered(self, driver: str) -> None:
        self._registered.fire()
        self._changed.fire()

    def changed(self) -> None:
        """Something a waiting pod may be waiting for changed (claims, slices, a pod gone): try again."""
        self._changed.fire()

    def sources_ready(self, records: Iterable[PodRecord]) -> None:
        """Every pod is known (the first manifest scan): reservations restored, the reconcile pass on."""
        self.claims.seed(
            ((s.key, s.claim_uid, s.pod_uids or ()) for s, _prepared in self.manager.claim_infos()),
            {r.uid: r.pod.name for r in records},
        )
        self.manager.sources_ready = True

    async def stop(self) -> None:
        for task in self._terminating.values():
            task.cancel()
        await asyncio.gather(*self._terminating.values(), return_exceptions=True)
        self._terminating.clear()

    # --- preparing ---

    async def prepare(self, record: PodRecord) -> bool:
        """One try: the claims reserved for the pod, then PrepareResources. On failure the pod's reason and
        message say why (it stays Pending); on success they are cleared."""
        pod = dra_pod(record)
        try:
            self.claims.reserve(pod)
            await self.manager.prepare_resources(pod)
        except ReservationError as err:
            _waiting(record, UNSCHEDULABLE, str(err))
            return False
        except PrepareError as err:
            _waiting(record, PREPARE_FAILED, f"Failed to prepare dynamic resources: {err}")
            return False
        if record.reason in (PREPARE_FAILED, UNSCHEDULABLE):
            record.reason, record.message = "", ""
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
        pod = dra_pod(record)
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
        pod = dra_pod(record)
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
            self.claims.release(record.uid)
            return False
        record.terminating = True
        self._terminating[record.uid] = asyncio.create_task(
            self._unprepare(record), name=f"unprepare {record.pod.namespace}/{record.pod.name}"
        )
        return True

    async def _unprepare(self, record: PodRecord) -> None:
        pod = dra_pod(record)
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
        self.claims.release(record.uid)
        self._changed.fire()
        if self.on_gone is not None:
            self.on_gone(record)

    def forget_unprepared(self, uid: str) -> bool:
        """A pod removed while its prepare ran: the reconcile pass unprepares what the prepare recorded.
        Returns False (the pod is not to be started)."""
        self.claims.release(uid)
        if self.manager.pod_might_need_to_unprepare_resources(uid):
            task = asyncio.create_task(self.manager.reconcile(), name="dra reconcile")
            task.add_done_callback(_log_failure)
        return False


def _waiting(record: PodRecord, reason: str, message: str) -> None:
    if record.message != message:
        pod = record.pod
        log.warning("pod %s/%s (%s) waits: %s", pod.namespace, pod.name, pod.uid, message)
    record.reason, record.message = reason, message


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("DRA reconcile pass failed", exc_info=task.exception())
