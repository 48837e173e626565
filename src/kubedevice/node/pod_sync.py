"""Keeping the node's pods in step with the manifest folder (the kubelet's pod config and admission loop).

How pods flow: the files the folder watch names are read again (and the whole folder every
`rescan_interval`); a new pod is admitted (devices for every container, the checkpoint holding them, its
claims prepared by node.dra.flow, then each container's run options), each plugin called one at a time in
admission order while the checkpoint write is shared by the pods allocated meanwhile; a removed file
terminates its pods and frees their devices (a pod with claims is Terminating until they are unprepared).
What a pod becomes at a restart is node.pod_restore's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os

from kubedevice.dra import DRAError
from kubedevice.durations import format_duration
from kubedevice.manager import DeviceManager, DeviceManagerError, RunContainerOptions
from kubedevice.node.admission import (
    PodRejected,
    allocate_pod,
    device_needs,
    start_containers,
    wait_for_devices,
)
from kubedevice.node.config import NodeConfig, NodePaths
from kubedevice.node.dynamic_resources import DRAFlow, has_claims
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
from kubedevice.node.pods import ADMISSION_ERROR_REASON, PodRecord, PodTable
from kubedevice.node.state import PodStateFile, SavedPod
from kubedevice.topology import TopologyManager
from kubedevice.watch import DirectoryWatch, Mask

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
        dra: DRAFlow,
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
        self._dra = dra
        #: Manifests whose pod UID is still Terminating: admitted anew once its termination ends.
        self._comeback: dict[str, PodManifest] = {}
        self._folder = ManifestFolder(
            paths.manifests, allow_symlinks=config.allow_symlinks, selector_compiler=dra.selectors
        )
        self._manifest_watch = DirectoryWatch(
            paths.manifests,
            relevant=self._is_manifest_event,
            poll_interval=config.scan_interval,
            use_inotify=config.use_inotify,
            name="manifests",
        )
        #: resource -> done once the run options of the last pod that took its turn are (the next one's).
        self._last_start: dict[str, asyncio.Future[None]] = {}
        self._admissions: dict[str, asyncio.Task[None]] = {}
        self._waiting: set[str] = set()
        #: Pods admitted without devices whose Running state is being saved before it is reported.
        self._starting: set[str] = set()
        self._scan_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the folder once (restoring what ran before), then follow it."""
        # Watching starts before the first scan, so a manifest written during it is not missed.
        self._manifest_watch.start()
        await self._first_scan(self._manager)
        self._scan_task = asyncio.create_task(self._scan_loop(), name="manifest scan")

    async def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            await asyncio.gather(self._scan_task, return_exceptions=True)
            self._scan_task = None
        await self._manifest_watch.stop()
        for task in list(self._admissions.values()):
            task.cancel()
        await asyncio.gather(*self._admissions.values(), return_exceptions=True)

    async def _first_scan(self, manager: DeviceManager) -> None:
        saved = await asyncio.to_thread(self._state.load)
        checkpointed = manager.pod_uids()
        rebooted = self._state.saved_boot_id not in (None, self._state.boot_id)
        if rebooted:
            log.info("the node rebooted: pods in the checkpoint are admitted again, with checks")
        result = await asyncio.to_thread(self._folder.scan)
        self._report_bad_files(result)
        self._dra.update_documents(result.dra)
        new: list[PodRecord] = []
        restored: list[str] = []
        for m in result.pods:
            record = PodRecord(m)
            self.pods.add(record)
            self._dra.restore_routes(record)  # a recorded decision: its pod counts as one with claims
            if restore_terminated(record, saved.get(m.uid)):
                continue
            # A pod with claims may hold devices while it waits for them: its claims' entries tell.
            ran = was_running(saved.get(m.uid), m) or on_record(record, checkpointed, self._dra)
            try:
                if not rebooted and ran and await restore_running(self._topology, manager, self._dra, record):
                    restored.append(pod_name(record.pod))
                    continue
            except DeviceManagerError as err:
                self._fail(record, str(err))
                continue
            new.append(record)
        log_pods(
            restored,
            "pod %s was running before the restart: Running",
            "%d pods were running before the restart: Running (%s, ...)",
        )
        manager.sources_ready = True
        self._dra.sources_ready(self.pods)
        freed = manager.update_allocated_devices(self.pods.active_uids())
        log_pods(
            freed,
            "pod %s is gone from the manifests: its devices were freed",
            "%d pods are gone from the manifests: their devices were freed (%s, ...)",
        )
        await self._save_state()
        for record in new:
            self._start_admission(record)

    def _is_manifest_event(self, name: str, mask: Mask) -> bool:
        if not is_manifest_name(name):
            return False
        # A regular file is reported again when the writer closes it; reading it at its creation could
        # catch it half written. A symlink is whole when it is created.
        return not mask & Mask.CREATE or os.path.islink(self.paths.manifests / name)

    async def _scan_loop(self) -> None:
        """Scan the files the watch reports changed, and in full every `rescan_interval`."""
        watch = self._manifest_watch
        while True:
            names = watch.take_names() if await watch.wait_within(self.config.rescan_interval) else None
            try:
                result = await asyncio.to_thread(self._folder.scan, self.pods.uids(), names)
            except Exception:
                # A scan failure must never stop the daemon; the next scan tries again.
                log.exception("scanning %s failed", self.paths.manifests)
                continue
            await self._reconcile(result)

    async def _reconcile(self, result: ScanResult) -> None:
        self._report_bad_files(result)
        self._dra.update_documents(result.dra)
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
                    self._start_admission(record)  # Pending: nothing the state file keeps changed
            elif known.manifest.digest != m.digest:
                changed |= self._manifest_changed(known, m)
            elif known.manifest.file != m.file:
                known.manifest = m  # renamed: the pod goes on, its file's changes now count
        if changed:
            await self._save_state()

    def _manifest_changed(self, record: PodRecord, m: PodManifest) -> bool:
        """The same UID (set in metadata) with new content: only a Failed pod is tried again."""
        if m.succeeded and record.phase != "Succeeded":
            self._cancel_admission(record.uid)
            record.manifest, record.phase, record.reason, record.message = m, "Succeeded", "", ""
            record.run_options = {}
            self._release()
            log.info("pod %s succeeded: its devices were freed", pod_name(m.pod))
            return True
        if record.phase == "Failed":
            record.manifest, record.phase, record.reason, record.message = m, "Pending", "", ""
            record.detail, record.warnings = "", []
            self._start_admission(record)
            return True
        log.warning(
            "pod %s: manifest %s changed but a pod's spec cannot change; ignored", pod_name(m.pod), m.file
        )
        record.manifest = m
        return False

    def _terminate(self, record: PodRecord, why: str) -> None:
        self._cancel_admission(record.uid)
        if self._dra.terminate(record):
            why += "; Terminating until its claims are unprepared"
        else:
            self.pods.remove(record.uid)
        self._topology.remove_pod(record.uid)
        self._release()
        log.info("pod %s terminated (%s): its devices were freed", pod_name(record.pod), why)

    def terminated(self, record: PodRecord) -> None:
        """A Terminating pod's claims are unprepared: it goes, and its manifest, if back, is admitted."""
        if self.pods.get(record.uid) is record:
            self.pods.remove(record.uid)
        comeback = self._comeback.pop(record.uid, None)
        if comeback is not None:
            self.pods.add(new := PodRecord(comeback))
            self._start_admission(new)

    def _release(self) -> None:
        self._manager.update_allocated_devices(self.pods.active_uids())

    def _cancel_admission(self, uid: str) -> None:
        # Only a pod still waiting for devices is cancelled; an admission under way finishes, then the
        # pod's devices are garbage-collected like any terminated pod's.
        task = self._admissions.get(uid)
        if task is not None and uid in self._waiting:
            task.cancel()

    def _start_admission(self, record: PodRecord) -> None:
        task = asyncio.create_task(self._admit(record), name=f"admit {pod_name(record.pod)}")
        self._admissions[record.uid] = task
        task.add_done_callback(functools.partial(self._admission_done, record.uid))

    def _admission_done(self, uid: str, task: asyncio.Task[None]) -> None:
        if self._admissions.get(uid) is task:
            del self._admissions[uid]
        if not task.cancelled() and task.exception() is not None:
            log.error("admission of pod %s crashed", uid, exc_info=task.exception())

    async def _admit(self, record: PodRecord) -> None:
        manager = self._manager
        # Which extended resources DRA meets is decided first: the device manager never sees those.
        self._dra.decide_routes(record, {r.resource_name for r in manager.registered_resources()})
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
            prepared = not has_claims(record) or await self._prepare_claims(record, started)
            if before:
                await asyncio.wait(before)  # never cancels them, even when this admission is
            if prepared and self._pending(record):
                options = await start_containers(manager, record.device_pod)
                if has_claims(record):
                    options = self._dra.run_options(record, options)
        except PodRejected as err:
            self._fail(record, err.message, err.reason, err.detail)
        except (DeviceManagerError, DRAError) as err:
            self._fail(record, str(err))
        finally:
            if not started.done():
                started.set_result(None)
        if options is not None:
            record.run_options = options
            if (
                not self._dra.prepared_on_record(record)
                if has_claims(record)
                else all(o is None for o in options.values())
            ):
                # No checkpoint entry says it runs: save that before anyone is told it does.
                self._starting.add(record.uid)
                try:
                    await self._save_state()
                finally:
                    self._starting.discard(record.uid)
            record.phase = "Running"
            self._metrics.admissions.inc()
            log.info("pod %s admitted: Running", pod_name(record.pod))
        if self.pods.get(record.uid) is not record or not record.active:
            self._release()  # removed while admitting, or failed part-way: free what it got
        if not record.active:
            # A Running pod was saved above or is in the checkpoint; a removed pod was saved by the scan
            # that removed it; a pod that ended Failed is saved now.
            await self._save_state()

    def _pending(self, record: PodRecord) -> bool:
        """Still in the table and waiting for its admission (not removed nor finished meanwhile)."""
        return self.pods.get(record.uid) is record and record.phase == "Pending" and not record.terminating

    async def _prepare_claims(self, record: PodRecord, started: asyncio.Future[None]) -> bool:
        """The DRA step: True once the pod's claims are prepared; False when it left first. While it
        waits, `started` is set: the pods after it on its device-plugin resources do not wait for it."""
        if not await self._dra.until_prepared(record, lambda: self._pending(record), started):
            return False
        return self._pending(record) or self._dra.forget_unprepared(record.uid)

    def _fail(
        self, record: PodRecord, message: str, reason: str = ADMISSION_ERROR_REASON, detail: str = ""
    ) -> None:
        record.phase, record.reason, record.message, record.detail = "Failed", reason, message, detail
        record.run_options = {}
        self._topology.remove_pod(record.uid)
        self._metrics.admission_failures.inc()
        log.warning("pod %s failed admission: %s", pod_name(record.pod), message)
        if detail:
            log.info("pod %s: %s because %s", pod_name(record.pod), reason, detail)

    def _report_bad_files(self, result: ScanResult) -> None:
        errors = result.errors
        if result.covered is not None:
            errors = {f: e for f, e in self.bad_files.items() if f not in result.covered} | errors
        for file, error in sorted(errors.items()):
            if self.bad_files.get(file) != error:
                log.error("manifest %s: %s", file, error)
        for file in sorted(set(self.bad_files) - set(errors)):
            log.info("manifest %s: no longer reported (fixed or removed)", file)
        self.bad_files = dict(errors)

    def remembered_pods(self) -> dict[str, SavedPod]:
        """What the state file keeps (node.pod_restore.remembered)."""
        return remembered(self.pods, self._starting, self._manager.pod_uids(), self._dra)

    async def _save_state(self) -> None:
        try:
            await self._state.save(self.remembered_pods)
        except OSError as err:
            log.error("cannot write the pod state file %s: %s", self.paths.state_file, err)
