"""The control plane's stand-in on one node, as the kubelet stand-in reaches it: a few calls that return
outcomes.

In a cluster the kubelet never decides a claim: the API server stores the documents, the resource claim
controller makes claims from templates and the special claim of extended resources, the scheduler allocates
and reserves, and the kubelet reads the result from the pod's status and the claims. On one node the
daemon plays all of them; this facade is where its pod path meets them:

- `update_documents` hands over each manifest scan's DRA documents (the API server's objects);
- `extended_routes` decides once which of a pod's extended resources DRA meets;
- `schedule` is everything between admission and PrepareResources for one pod: it answers the pod as the
  DRA manager is handed it, and why it must wait when it must (the binding conditions of its devices
  included: controlplane.binding);
- `restore` gives a pod that ran before a restart its view back, deciding nothing;
- `pod_gone` and `reconcile` drop what pods that left held (reservations, generated claims, allocations);
- `put_device_status` takes a driver's `status.devices` (the status API's PUT), durably.

Each decision is applied to the claim store at once and written to `dra_claims.json` in the background
(group-committed); `changed` fires whenever something a waiting pod may wait for changed (documents,
slices, devices freed). Nothing here writes a pod's status: the caller does, from the outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kubedevice.checkpoint.dra_model import ClaimInfoState
from kubedevice.controlplane.binding import BINDING_TIMEOUT_S, BindingWaits
from kubedevice.controlplane.claim_saver import ClaimStoreSaver
from kubedevice.controlplane.claim_store import ClaimStore, ClaimStoreFile, Updates, reconcile_at_start
from kubedevice.controlplane.claim_view import ClaimView
from kubedevice.controlplane.device_status import StatusRefusal, device_status_pruned, device_status_update
from kubedevice.controlplane.extended import (
    ExtendedRoutes,
    coexistence_warnings,
    route_extended_resources,
)
from kubedevice.controlplane.pod_step import DRAContext, Waiting, dra_step, recorded_routes, restore_pod
from kubedevice.controlplane.reservation import pod_removed
from kubedevice.controlplane.slice_folder import SliceFolder
from kubedevice.controlplane.taint_times import TAINT_TIMES_NAME, TaintTimes, load_taint_times
from kubedevice.dra.claim_names import pod_claim_names
from kubedevice.dra.types import DRAPod
from kubedevice.manager.types import Pod
from kubedevice.resource.model import ClaimDocument, DRADocuments
from kubedevice.resource.node_labels import node_labels as node_labels_of
from kubedevice.resource.pod_claims import PodClaims
from kubedevice.resource.times import metav1_time
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.tasks import Signal

__all__ = ["ControlPlane", "Scheduled", "Waiting"]

log = logging.getLogger("kubedevice.node.daemon")


@dataclass(frozen=True, slots=True)
class Scheduled:
    """The control plane's answer for one pod about to be prepared."""

    #: The pod as the DRA manager is handed it: `resourceClaimStatuses` naming its generated claims and the
    #: special claim in `extendedResourceClaimStatus`, as the claim controller writes them.
    pod: DRAPod
    #: None: its claims are allocated and reserved for it, PrepareResources may go on. Else the reason,
    #: message and detail of its Pending status (nothing allocated or reserved then, unless it waits for
    #: the binding conditions of its allocated devices).
    waiting: Waiting | None = None
    #: When to try again at the latest even if nothing changes: the binding timeout of a pod that waits
    #: for binding conditions.
    retry_at: datetime | None = None


class ControlPlane:
    """The DRA documents of the manifest folder, the ResourceSlice folder, the claim store and the claim
    controllers, for node `node_name`."""

    def __init__(
        self,
        store: ClaimStore,
        store_file: ClaimStoreFile,
        slice_folder: Path,
        *,
        node_name: str,
        node_labels: Mapping[str, str] | None = None,
        use_inotify: bool = True,
        binding_timeout: float = BINDING_TIMEOUT_S,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        taint_times: TaintTimes | None = None,
    ) -> None:
        self.node_name = node_name
        #: The node's labels, matched by node selectors (`kubernetes.io/hostname=<node_name>` by default).
        self.node_labels = node_labels_of(node_name, node_labels)
        self.store = store
        #: When each NoExecute taint without `timeAdded` was first seen (`device_taints.json`).
        self.taint_times = taint_times or TaintTimes(store_file.path.parent / TAINT_TIMES_NAME)
        self.clock = clock
        #: The pods' waits for the binding conditions of their devices.
        self.binding = BindingWaits(node_name, binding_timeout)
        self._saver = ClaimStoreSaver(store, store_file)
        #: Fires when something a pod waiting for its claims may wait for changed.
        self.changed = Signal()
        #: The last manifest scan's DRA documents.
        self.documents = DRADocuments()
        #: The claims as an API server shows them: the DRA manager's ClaimSource, and the status API's.
        self.claims = ClaimView(lambda: self.documents, store)
        #: Compiles selectors as the manifests are read and evaluates them in allocations (one cache).
        self.selectors = CelSelectors()
        self.slices = SliceFolder(
            slice_folder,
            node_name,
            node_labels=self.node_labels,
            on_change=self.changed.fire,
            use_inotify=use_inotify,
        )

    @classmethod
    async def load(
        cls,
        root: Path,
        slice_folder: Path,
        *,
        node_name: str,
        node_labels: Mapping[str, str] | None = None,
        use_inotify: bool = True,
        binding_timeout: float = BINDING_TIMEOUT_S,
        fault: Callable[[str], None] | None = None,
        taint_fault: Callable[[str], None] | None = None,
    ) -> ControlPlane:
        """The control plane on the claim store in `root` (`dra_claims.json`, read on a thread) and the
        taints' first sightings (`device_taints.json`). Raises ClaimStoreError when the claim store cannot
        be used. `fault` and `taint_fault` are their test-only write hooks."""
        store_file = ClaimStoreFile(root, fault=fault)
        store = await asyncio.to_thread(store_file.load)
        taint_times = await load_taint_times(root, taint_fault)
        return cls(
            store,
            store_file,
            slice_folder,
            node_name=node_name,
            node_labels=node_labels,
            use_inotify=use_inotify,
            binding_timeout=binding_timeout,
            taint_times=taint_times,
        )

    async def start(self) -> None:
        """Follow the ResourceSlice folder (every file there is deleted first: plugins publish again)."""
        await self.slices.start()

    async def stop(self) -> None:
        await self.slices.stop()
        await self._saver.stop()
        await self.taint_times.stop()

    def _apply(self, updates: Updates) -> bool:
        return self._saver.apply(updates)

    # --- the API server's objects ---

    def update_documents(self, documents: DRADocuments) -> None:
        """A scan's DRA documents; pods waiting for their claims try again when they changed."""
        if documents is not self.documents:
            self.documents = documents
            self._apply(device_status_pruned(self.store, documents))
            self.changed.fire()

    # --- extended resources ---

    def extended_routes(self, pod: Pod, plugin_resources: Set[str]) -> ExtendedRoutes:
        """Which of the pod's extended resources DRA meets, each with its DeviceClass. A decision recorded
        for the pod (its special claim) stands, so it never flips; else a registered device plugin
        (`plugin_resources`), then a DeviceClass mapping the name, decide now."""
        routes = recorded_routes(self.store, pod)
        if routes is not None:
            return routes
        routes = route_extended_resources(pod, plugin_resources, self.documents)
        for name, device_class in sorted(routes.dra.items()):
            log.info(
                "pod %s/%s (%s): %s is met by DRA through DeviceClass %s (no device plugin for it)",
                pod.namespace,
                pod.name,
                pod.uid,
                name,
                device_class,
            )
        return routes

    def recorded_routes(self, pod: Pod) -> ExtendedRoutes | None:
        """The decision recorded for a pod that ran before a restart, or None."""
        return recorded_routes(self.store, pod)

    def coexistence_warnings(self, plugin_resources: Iterable[str]) -> list[str]:
        """Names offered by a registered device plugin and by a DeviceClass: the device plugin serves them."""
        return coexistence_warnings(plugin_resources, self.documents)

    # --- one pod ---

    def schedule(
        self,
        pod: Pod,
        claims: PodClaims,
        routes: ExtendedRoutes | None,
        cache: Sequence[ClaimInfoState],
    ) -> Scheduled:
        """One try of the pod's DRA step: claims generated from templates, the special claim, one search
        for the claims without allocation, the reservations (controlplane.pod_step), then the binding
        conditions of its devices (controlplane.binding). `cache` is the DRA manager's claim-info cache
        (read only when an allocation needs the devices in use)."""
        now = self.clock()
        context = DRAContext(
            documents=self.documents,
            pools=self.slices.pools(),
            node_name=self.node_name,
            cache=cache,
            selectors=self.selectors,
            now=metav1_time(now),
            node_labels=self.node_labels,
        )
        step = dra_step(pod, claims, routes or ExtendedRoutes(), self.store, context)
        self._apply(step.updates)
        if step.waiting is not None:
            return Scheduled(step.pod, step.waiting)
        return self._bind(step.pod, now)

    def _bind(self, pod: DRAPod, now: datetime) -> Scheduled:
        """PreBind's wait for the binding conditions of the pod's devices; a claim whose binding failed or
        timed out is deallocated (when the daemon allocated it) and the pod tries again."""
        claims = [self.claims.claim(pod.namespace, n.claim_name) for n in pod_claim_names(pod)]
        step = self.binding.check(pod, [c for c in claims if c is not None], self.store, now)
        if step.release:
            self._apply(step.release)
            log.warning(
                "pod %s/%s (%s): %s: it is allocated again", pod.namespace, pod.name, pod.uid, step.said
            )
            self.changed.fire()  # its devices are free: it (and any pod waiting for them) tries again
        return Scheduled(pod, step.waiting, step.retry_at)

    def restore(self, pod: Pod, claims: PodClaims) -> DRAPod:
        """A pod that was running before the restart: its view (generated claims, special claim) comes back
        from the claim store; nothing is decided anew."""
        result = restore_pod(pod, claims, self.store, self.documents)
        self._apply(result.updates)
        return result.pod

    def restored_view(self, pod: Pod, claims: PodClaims) -> DRAPod:
        """The view `restore` gives, with nothing applied: what the DRA checkpoint is asked about at start
        (did the pod run?) before the pod is restored or admitted again."""
        return restore_pod(pod, claims, self.store, self.documents).pod

    def pod_gone(self, pod_uid: str) -> None:
        """The pod is gone (its claims unprepared, or never prepared): its reservations and generated
        claims go. Waiting pods try again even when the store did not change: devices the DRA manager's
        cache held for it may be free now."""
        self.binding.forget(pod_uid)
        self._apply(pod_removed(self.store, pod_uid))
        self.changed.fire()

    def reconcile(self, known_pods: Collection[str], cache: Iterable[ClaimInfoState]) -> None:
        """Bring the claim store in line with the pods the node knows and the DRA manager's cache: what
        pods that left held is dropped (at start, and after each of the DRA manager's reconcile passes)."""
        if self._apply(reconcile_at_start(self.store, self.documents, known_pods, list(cache))):
            self.changed.fire()

    # --- the claims' status, written by their drivers ---

    async def put_device_status(
        self, namespace: str, name: str, driver: str, body: object
    ) -> ClaimDocument | StatusRefusal:
        """`driver`'s update of the claim's `status.devices` (controlplane.device_status): the claim as it
        is then, once on disk, or why it is refused."""
        key = f"{namespace}/{name}"
        outcome = device_status_update(
            key, self.claims.claim(namespace, name), self.store.get(key), driver, body
        )
        if isinstance(outcome, StatusRefusal):
            return outcome
        written = self._apply({key: outcome})
        # The answer is the claim as this update left it (whatever runs while the write waits).
        claim = self.claims.claim(namespace, name)
        if written:
            try:
                await self._saver.commit()
            except Exception as err:
                return StatusRefusal(
                    "InternalError",
                    f"cannot write {self._saver.path}: {err} — the status is kept in memory and written with "
                    "the next change",
                )
            finally:
                self.changed.fire()  # a pod may wait for this device's binding conditions
        assert claim is not None  # the update was decided on it a moment ago, without a pause
        return claim
