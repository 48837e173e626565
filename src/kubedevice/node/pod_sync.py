"""Keeping the node's pods in step with the manifest folder (the kubelet's pod config and sync loop).

The files the folder watch names are read again (and the whole folder every `rescan_interval`); a new pod
goes to the pod workers (node.pod_workers: admission, its claims, Running), a removed file terminates its
pods (a pod with claims is Terminating until they are unprepared, and its manifest, if back meanwhile, is
admitted once it is gone). What a pod becomes at a restart is node.pod_restore's; what the state file keeps
is written here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable

from kubedevice.controlplane.plane import ControlPlane
from kubedevice.manager import DeviceManager, DeviceManagerError
from kubedevice.node.config import NodeConfig, NodePaths
from kubedevice.node.dynamic_resources import DynamicResources
from kubedevice.node.manifest_folder import ManifestFolder, ScanResult, is_manifest_name
from kubedevice.node.manifests import PodManifest
from kubedevice.node.metrics import NodeMetrics
from kubedevice.node.pod_restore import (
    log_pods,
    on_record,
    pod_name,
    remembered,
    restore_running,
    restore_terminated,
    was_running,
)
from kubedevice.node.pod_workers import PodWorkers
from kubedevice.node.pods import PodRecord, PodTable
from kubedevice.node.state import PodStateFile, SavedPod
from kubedevice.node.taint_eviction import TaintEvictionController
from kubedevice.resource.document_file import is_whole_at_creation
from kubedevice.topology import TopologyManager
from kubedevice.watch import DirectoryWatch, Mask
from kubedevice.wording import failure_line

log = logging.getLogger("kubedevice.node.daemon")


class PodSync:
    """Admits, keeps, restores and terminates the pods of the manifest folder on one device manager."""

    def __init__(
        self,
        config: NodeConfig,
        paths: NodePaths,
        manager: DeviceManager,
        topology: TopologyManager,
        pods: PodTable,
        state: PodStateFile,
        metrics: NodeMetrics,
        control: ControlPlane,
        dynamic: DynamicResources,
    ) -> None:
        self.config = config
        self.paths = paths
        self.pods = pods
        #: manifest file -> why it could not be read.
        self.bad_files: dict[str, str] = {}
        self._manager = manager
        self._topology = topology
        self._state = state
        self._metrics = metrics
        self._control = control
        self._dynamic = dynamic
        #: Manifests whose pod UID is still Terminating: admitted anew once its termination ends.
        self._comeback: dict[str, PodManifest] = {}
        self._folder = ManifestFolder(
            paths.manifests, allow_symlinks=config.allow_symlinks, selector_compiler=control.selectors
        )
        self._workers = PodWorkers(
            config, manager, topology, pods, metrics, control, dynamic, save_state=self._save_state
        )
        self.evictions = TaintEvictionController(
            control, pods, self._workers.evict, self._workers.running, metrics
        )
        self._manifest_watch = DirectoryWatch(
            paths.manifests,
            relevant=self._is_manifest_event,
            poll_interval=config.scan_interval,
            use_inotify=config.use_inotify,
            name="manifests",
        )
        self._scan_task: asyncio.Task[None] | None = None
        #: The folder has been read once (and what ran before restored): the kubelet's sources are ready.
        self._first_scan_done = False

    async def start(self) -> None:
        """Read the folder once (restoring what ran before), then follow it. A first read that fails is
        logged and tried again at the next scan; until one succeeds no pod is restored, admitted or
        garbage-collected (the kubelet's sources are not ready)."""
        # Watching starts before the first scan, so a manifest written during it is not missed.
        self._manifest_watch.start()
        await self._first_scan(self._manager)
        self._scan_task = asyncio.create_task(self._scan_loop(), name="manifest scan")
        self.evictions.start()

    async def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            await asyncio.gather(self._scan_task, return_exceptions=True)
            self._scan_task = None
        await self._manifest_watch.stop()
        await self.evictions.stop()
        await self._workers.stop()

    async def _first_scan(self, manager: DeviceManager) -> None:
        result = await self._scan()
        if result is not None:
            self._report_bad_files(result)
        if result is None or not result.listed:
            return  # the sources are not ready: nothing restored, admitted or freed until a scan reads them
        self._first_scan_done = True
        saved = await asyncio.to_thread(self._state.load)
        checkpointed = manager.pod_uids()
        rebooted = self._state.saved_boot_id not in (None, self._state.boot_id)
        if rebooted:
            log.info("the node rebooted: pods in the checkpoint are admitted again, with checks")
        self._control.update_documents(result.dra)
        new: list[PodRecord] = []
        restored: list[str] = []
        for m in result.pods:
            record = PodRecord(m)
            self.pods.add(record)
            # A recorded decision: its pod counts as one with claims.
            record.routes = self._control.recorded_routes(record.pod) or record.routes
            if restore_terminated(record, saved.get(m.uid)):
                continue
            if record.has_claims:
                record.dra_pod = self._control.restored_view(record.pod, m.claims)
            # A pod with claims may hold devices while it waits for them: its claims' entries tell.
            ran = was_running(saved.get(m.uid), m) or on_record(record, checkpointed, self._dynamic)
            try:
                if not rebooted and ran and await self._restore_running(record):
                    restored.append(pod_name(record.pod))
                    continue
            except DeviceManagerError as err:
                self._workers.fail(record, str(err))
                continue
            new.append(record)
        log_pods(
            restored,
            "pod %s was running before the restart: Running",
            "%d pods were running before the restart: Running (%s, ...)",
        )
        manager.sources_ready = True
        self._workers.sources_ready()
        freed = manager.update_allocated_devices(self.pods.active_uids())
        log_pods(
            freed,
            "pod %s is gone from the manifests: its devices were freed",
            "%d pods are gone from the manifests: their devices were freed (%s, ...)",
        )
        await self._save_state()
        for record in new:
            self._workers.admit(record)

    def _is_manifest_event(self, name: str, mask: Mask) -> bool:
        if not is_manifest_name(name):
            return False
        # A regular file is reported again when the writer closes it; reading it at its creation could
        # catch it half written. A symlink (or a FIFO, which is then refused) is whole when it is created.
        return not mask & Mask.CREATE or is_whole_at_creation(self.paths.manifests / name)

    async def _scan_loop(self) -> None:
        """Scan the files the watch reports changed, and in full every `rescan_interval`."""
        watch = self._manifest_watch
        while True:
            names = watch.take_names() if await watch.wait_within(self.config.rescan_interval) else None
            if not self._first_scan_done:
                await self._first_scan(self._manager)
                continue
            result = await self._scan(names)
            if result is not None:
                await self._reconcile(result)

    async def _scan(self, names: Iterable[str] | None = None) -> ScanResult | None:
        """The folder's files (those named, or all), or None when the scan failed."""
        try:
            return await asyncio.to_thread(self._folder.scan, self.pods.uids(), names)
        except Exception as err:
            # A scan failure must never stop the daemon: one line (a file's failure is already that file's
            # error, so this is a bug, not an input), and the next scan tries again.
            log.error(
                "scanning %s failed, tried again at the next scan: %s",
                self.paths.manifests,
                failure_line(err),
            )
            return None

    async def _restore_running(self, record: PodRecord) -> bool:
        return await restore_running(self._topology, self._manager, self._control, self._dynamic, record)

    async def _reconcile(self, result: ScanResult) -> None:
        self._report_bad_files(result)
        if not result.listed:
            return  # nothing is known of the pods: they stay as they are (the kubelet sends no update)
        self._control.update_documents(result.dra)
        current = {m.uid: m for m in result.pods}
        changed = False
        files = {m.file for m in result.pods}
        covered = result.covered
        for uid, m in list(self._comeback.items()):
            if (covered is None or m.file in covered) and uid not in current:
                del self._comeback[uid]
        for record in self.pods:
            file = record.manifest.file
            if record.terminating or (covered is not None and file not in covered):
                continue  # Terminating already, or a file this scan did not look at
            if record.uid not in current and file not in result.errors:
                # Without metadata.uid an edit makes a new pod: the old one ends, its file still there.
                edited = file in files
                self._terminate(record, "its manifest changed" if edited else "its manifest was removed")
                changed = True
        for m in result.pods:
            known = self.pods.get(m.uid)
            if known is not None and known.terminating:
                self._comeback[m.uid] = m
            elif known is None:
                record = PodRecord(m)
                self.pods.add(record)
                if m.succeeded:
                    record.phase = "Succeeded"
                    log.info("pod %s from %s has already succeeded: not admitted", pod_name(m.pod), m.file)
                    changed = True
                else:
                    self._workers.admit(record)  # Pending: nothing the state file keeps changed
            elif known.manifest.digest != m.digest:
                changed |= self._manifest_changed(known, m)
            elif known.manifest.file != m.file:
                known.manifest = m  # renamed: the pod goes on, its file's changes now count
        if changed:
            await self._save_state()

    def _manifest_changed(self, record: PodRecord, m: PodManifest) -> bool:
        """The same UID (set in metadata) with new content: only a Failed pod is tried again."""
        if m.succeeded and record.phase != "Succeeded":
            self._workers.cancel(record.uid)
            record.manifest, record.phase, record.reason, record.message = m, "Succeeded", "", ""
            record.run_options = {}
            self._workers.release()
            log.info("pod %s succeeded: its devices were freed", pod_name(m.pod))
            return True
        if record.phase == "Failed":
            record.manifest, record.phase, record.reason, record.message = m, "Pending", "", ""
            record.detail, record.warnings, record.conditions = "", [], ()
            self._workers.admit(record)
            return True
        log.warning(
            "pod %s: manifest %s changed but a pod's spec cannot change; ignored", pod_name(m.pod), m.file
        )
        record.manifest = m
        return False

    def _terminate(self, record: PodRecord, why: str) -> None:
        unprepared = self._workers.terminate(record)
        if unprepared is not None:
            unprepared.add_done_callback(functools.partial(self._unprepared, record))
            why += "; Terminating until its claims are unprepared"
        else:
            self.pods.remove(record.uid)
        self._topology.remove_pod(record.uid)
        self._workers.release()
        log.info("pod %s terminated (%s): its devices were freed", pod_name(record.pod), why)

    def _unprepared(self, record: PodRecord, task: asyncio.Task[None]) -> None:
        if not task.cancelled():  # cancelled: the daemon stops, the pod stays Terminating
            self._gone(record)

    def _gone(self, record: PodRecord) -> None:
        """A Terminating pod's claims are unprepared: it goes, and its manifest, if back, is admitted."""
        if self.pods.get(record.uid) is record:
            self.pods.remove(record.uid)
        comeback = self._comeback.pop(record.uid, None)
        if comeback is not None:
            self.pods.add(new := PodRecord(comeback))
            self._workers.admit(new)

    def _report_bad_files(self, result: ScanResult) -> None:
        errors = result.errors
        if not result.listed:
            errors = self.bad_files | errors
        elif result.covered is not None:
            errors = {f: e for f, e in self.bad_files.items() if f not in result.covered} | errors
        for file, error in sorted(errors.items()):
            if self.bad_files.get(file) != error:
                log.error("manifest %s: %s", file, error)
        for file in sorted(set(self.bad_files) - set(errors)):
            log.info("manifest %s: no longer reported (fixed or removed)", file)
        self.bad_files = dict(errors)

    def remembered_pods(self) -> dict[str, SavedPod]:
        """What the state file keeps (node.pod_restore.remembered)."""
        return remembered(self.pods, self._workers.starting, self._manager.pod_uids(), self._dynamic)

    async def _save_state(self) -> None:
        try:
            await self._state.save(self.remembered_pods)
        except OSError as err:
            log.error("cannot write the pod state file %s: %s", self.paths.state_file, err)
