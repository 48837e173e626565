"""The node daemon: a device manager fed with pods from a manifest folder, plus PodResources and a status API.

How pods flow: the manifest folder is scanned every `scan_interval`; a new pod is admitted (devices for
every container, then each container's run options) one at a time, as the kubelet admits; a removed file
terminates its pods and frees their devices. On start, pods found in the checkpoint keep their devices
(the manager's fast path) before anything is garbage-collected, and pods the state file remembers as
Failed or Succeeded stay so until their manifest changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import random
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
from prometheus_client import CollectorRegistry

from kubedevice.api.constants import (
    CHECKPOINT_NAME,
    ENDPOINT_STOP_GRACE_PERIOD_S,
    KUBELET_SOCKET_NAME,
    PRE_START_CONTAINER_TIMEOUT_S,
)
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.checkpoint import WRITE_STAGES
from kubedevice.manager import DeviceManager, DeviceManagerError, Pod
from kubedevice.node import views
from kubedevice.node.admission import admit, device_needs, wait_for_devices
from kubedevice.node.boot import current_boot_id
from kubedevice.node.durations import format_duration
from kubedevice.node.http import Response, StatusServer
from kubedevice.node.manifests import MANIFEST_SUFFIXES, ManifestFolder, PodManifest, ScanResult
from kubedevice.node.metrics import NodeMetrics
from kubedevice.node.podresources import PodResourcesMetrics, PodResourcesServicer
from kubedevice.node.pods import ADMISSION_ERROR_REASON, PodRecord, PodTable
from kubedevice.node.state import PodStateFile, SavedPod
from kubedevice.watch import DirectoryWatch, Mask

log = logging.getLogger(__name__)

_DIR_MODE = 0o750
_SOCKET_MODE = 0o660
#: Test-only: "STAGE:PROBABILITY:SEED" makes the daemon SIGKILL itself at that stage of checkpoint writes.
CHECKPOINT_FAULT_ENV = "KUBEDEVICE_TEST_CHECKPOINT_FAULT"


@dataclass(frozen=True, slots=True)
class NodePaths:
    """Every path of the daemon, all under one root (DESIGN.md, Conventions)."""

    root: Path
    manifests: Path

    @property
    def plugin_dir(self) -> Path:
        return self.root / "device-plugins"

    @property
    def kubelet_socket(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET_NAME

    @property
    def checkpoint(self) -> Path:
        return self.plugin_dir / CHECKPOINT_NAME

    @property
    def plugins_registry(self) -> Path:
        return self.root / "plugins_registry"

    @property
    def pod_resources_socket(self) -> Path:
        return self.root / "pod-resources" / "kubelet.sock"

    @property
    def status_socket(self) -> Path:
        return self.root / "kubedevice.sock"

    @property
    def state_file(self) -> Path:
        return self.root / "pod_state.json"

    @classmethod
    def under(cls, root: Path, manifests: Path | None = None) -> NodePaths:
        root = root.absolute()
        return cls(root=root, manifests=(manifests or root / "manifests").absolute())


@dataclass(frozen=True, slots=True)
class NodeConfig:
    root_dir: Path
    pod_manifest_path: Path | None = None
    stop_grace_period: float = ENDPOINT_STOP_GRACE_PERIOD_S
    #: Also serve the status API on this TCP address.
    http_addr: tuple[str, int] | None = None
    #: How long a new pod may wait for its plugins and healthy devices before admission is tried.
    admission_wait: float = 0.0
    allow_symlinks: bool = False
    #: How often the manifest folder is looked at where inotify cannot be used.
    scan_interval: float = 0.2
    #: A full scan this often even with inotify (events can be lost), as the kubelet's file source does.
    rescan_interval: float = 20.0
    #: False polls the manifest folder every `scan_interval` (for filesystems where inotify says nothing).
    use_inotify: bool = True
    #: Deadline of each Allocate, GetPreferredAllocation and PreStartContainer call (the kubelet's
    #: PreStartContainer deadline; Allocate has none in the kubelet, so a hung plugin would block forever).
    plugin_timeout: float = PRE_START_CONTAINER_TIMEOUT_S
    #: How often capacity is recomputed, as the kubelet's node status loop does (drops expired resources).
    status_interval: float = 1.0
    #: This boot's ID instead of the kernel's; a different one than last time means the node rebooted.
    boot_id: str | None = None


class NodeStartError(Exception):
    """The daemon cannot start; str() is one line naming what is wrong."""


async def socket_is_served(path: Path, wait: float = 1.0) -> bool:
    """True when some process accepts connections on the unix socket `path`."""
    try:
        async with asyncio.timeout(wait):
            _reader, writer = await asyncio.open_unix_connection(str(path))
    except TimeoutError:
        return True  # it exists and is listening, only too busy to accept
    except OSError:
        return False  # absent, or a stale file nobody serves
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


class NodeDaemon:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.paths = NodePaths.under(config.root_dir, config.pod_manifest_path)
        self.registry = CollectorRegistry()
        self.pods = PodTable()
        self.bad_files: dict[str, str] = {}
        self.metrics = NodeMetrics(self.registry, self.pods.count_by_phase)
        self.podresources_metrics = PodResourcesMetrics(self.registry)
        self.manager: DeviceManager | None = None
        self._folder = ManifestFolder(self.paths.manifests, allow_symlinks=config.allow_symlinks)
        self._manifest_watch = DirectoryWatch(
            self.paths.manifests,
            relevant=self._is_manifest_event,
            poll_interval=config.scan_interval,
            use_inotify=config.use_inotify,
            name="manifests",
        )
        self._state = PodStateFile(self.paths.state_file, current_boot_id(config.boot_id))
        #: resource -> lock: pods sharing a resource are admitted one at a time, as the kubelet admits; a
        #: pod never waits for a plugin it does not use (a hung plugin blocks only its own pods).
        self._admission_locks: dict[str, asyncio.Lock] = {}
        self._admissions: dict[str, asyncio.Task[None]] = {}
        self._waiting: set[str] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._grpc: grpc.aio.Server | None = None
        self._status = StatusServer(
            {
                "/healthz": lambda: Response.text("ok\n"),
                "/metrics": self._metrics_response,
                "/node": lambda: Response.json(
                    views.node_view(self._require_manager(), self.paths.checkpoint)
                ),
                "/pods": lambda: Response.json(
                    views.pods_view(self._require_manager(), self.pods, self.bad_files)
                ),
            }
        )

    @property
    def status_tcp_address(self) -> tuple[str, int] | None:
        return self._status.tcp_address

    def _require_manager(self) -> DeviceManager:
        if self.manager is None:
            raise RuntimeError("the node daemon is not started")
        return self.manager

    def _metrics_response(self) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)

    # ------------------------------------------------------------------------------------------------
    # Lifecycle

    async def start(self) -> None:
        paths = self.paths
        await asyncio.to_thread(_make_dirs, paths)
        if await socket_is_served(paths.kubelet_socket):
            raise NodeStartError(
                f"another process is serving {paths.kubelet_socket}; is a node daemon already running?"
            )
        timeout = self.config.plugin_timeout
        try:
            manager = DeviceManager(
                paths.plugin_dir,
                stop_grace_period=self.config.stop_grace_period,
                plugins_registry=paths.plugins_registry,
                registry=self.registry,
                active_pods=self.pods.active_uids,
                allocate_timeout=timeout,
                preferred_allocation_timeout=timeout,
                pre_start_timeout=timeout,
                checkpoint_fault=checkpoint_fault_from_env(os.environ),
            )
        except ValueError as err:
            raise NodeStartError(str(err)) from None
        # Nothing is garbage-collected until the manifest folder has been read once (sourcesReady).
        manager.sources_ready = False
        try:
            await manager.start()
        except RuntimeError as err:
            raise NodeStartError(str(err)) from None
        self.manager = manager
        # Watching starts before the first scan, so a manifest written during it is not missed.
        self._manifest_watch.start()
        try:
            await self._first_scan(manager)
            await self._serve()
        except BaseException:
            await self.stop()
            raise
        self._loops.append(asyncio.create_task(self._scan_loop(), name="manifest scan"))
        self._loops.append(asyncio.create_task(self._status_loop(), name="node status"))
        tcp = self._status.tcp_address
        log.info(
            "node daemon ready: root %s, manifests %s, status API on %s%s",
            paths.root,
            paths.manifests,
            paths.status_socket,
            f" and http://{tcp[0]}:{tcp[1]}" if tcp else "",
        )

    async def _serve(self) -> None:
        paths = self.paths
        server = grpc.aio.server()
        pr_grpc.add_PodResourcesListerServicer_to_server(
            PodResourcesServicer(
                self._require_manager(),
                lambda: [(r.pod, r.active) for r in self.pods],
                self.podresources_metrics,
            ),
            server,
        )
        with contextlib.suppress(FileNotFoundError):
            paths.pod_resources_socket.unlink()
        try:
            server.add_insecure_port("unix://" + str(paths.pod_resources_socket))
        except RuntimeError as err:
            raise NodeStartError(f"cannot serve {paths.pod_resources_socket}: {err}") from None
        await server.start()
        self._grpc = server
        os.chmod(paths.pod_resources_socket, _SOCKET_MODE)
        try:
            await self._status.start(paths.status_socket, self.config.http_addr)
        except OSError as err:
            raise NodeStartError(str(err)) from None

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops.clear()
        await self._manifest_watch.stop()
        for task in list(self._admissions.values()):
            task.cancel()
        await asyncio.gather(*self._admissions.values(), return_exceptions=True)
        await self._status.stop()
        if self._grpc is not None:
            await self._grpc.stop(0.5)
            self._grpc = None
        if self.manager is not None:
            await self.manager.stop()
        with contextlib.suppress(OSError):
            await self._state.save(self._terminated_pods())
        for path in (self.paths.status_socket, self.paths.pod_resources_socket):
            with contextlib.suppress(OSError):
                path.unlink()

    # ------------------------------------------------------------------------------------------------
    # Pods

    async def _first_scan(self, manager: DeviceManager) -> None:
        saved = await asyncio.to_thread(self._state.load)
        checkpointed = manager.pod_uids()
        rebooted = self._state.saved_boot_id not in (None, self._state.boot_id)
        if rebooted:
            log.info("the node rebooted: pods in the checkpoint are admitted again, with checks")
        result = await asyncio.to_thread(self._folder.scan)
        self._report_bad_files(result.errors)
        new: list[PodRecord] = []
        for m in result.pods:
            record = PodRecord(m)
            self.pods.add(record)
            if self._restore_terminated(record, saved.get(m.uid)):
                continue
            if m.uid in checkpointed and not rebooted:
                await self._restore_running(manager, record)
            else:
                new.append(record)
        manager.sources_ready = True
        for uid in manager.update_allocated_devices(self.pods.active_uids()):
            log.info("pod %s is gone from the manifests: its devices were freed", uid)
        await self._save_state()
        for record in new:
            self._start_admission(record)

    def _restore_terminated(self, record: PodRecord, saved: SavedPod | None) -> bool:
        if record.manifest.succeeded:
            record.phase = "Succeeded"
            return True
        if (
            saved is not None
            and saved.digest == record.manifest.digest
            and saved.phase in ("Failed", "Succeeded")
        ):
            record.phase = "Failed" if saved.phase == "Failed" else "Succeeded"
            record.reason, record.message = saved.reason, saved.message
            log.info("pod %s stays %s after the restart", _name(record.pod), record.phase)
            return True
        return False

    async def _restore_running(self, manager: DeviceManager, record: PodRecord) -> None:
        """A pod that held devices before the restart keeps them without a new admission (SPEC §8.1)."""
        try:
            record.run_options = await admit(manager, record.pod, already_running=True)
        except DeviceManagerError as err:
            self._fail(record, str(err))
            return
        record.phase = "Running"
        log.info("pod %s kept its devices across the restart: Running", _name(record.pod))

    def _is_manifest_event(self, name: str, mask: Mask) -> bool:
        if name.startswith(".") or not name.endswith(MANIFEST_SUFFIXES):
            return False
        # A regular file is reported again when the writer closes it; reading it at its creation could
        # catch it half written. A symlink is whole when it is created.
        return not mask & Mask.CREATE or os.path.islink(self.paths.manifests / name)

    async def _scan_loop(self) -> None:
        """Scan on every change the watch reports, and in full every `rescan_interval`."""
        while True:
            await self._manifest_watch.wait_within(self.config.rescan_interval)
            known = [r.uid for r in self.pods]
            try:
                result = await asyncio.to_thread(self._folder.scan, known)
            except Exception:
                # A scan failure must never stop the daemon; the next scan tries again.
                log.exception("scanning %s failed", self.paths.manifests)
                continue
            await self._reconcile(result)

    async def _reconcile(self, result: ScanResult) -> None:
        self._report_bad_files(result.errors)
        current = {m.uid: m for m in result.pods}
        changed = False
        for record in self.pods:
            if record.uid not in current and record.manifest.file not in result.errors:
                self._terminate(record, "its manifest was removed")
                changed = True
        for m in result.pods:
            known = self.pods.get(m.uid)
            if known is None:
                record = PodRecord(m)
                self.pods.add(record)
                if m.succeeded:
                    record.phase = "Succeeded"
                    log.info("pod %s from %s has already succeeded: not admitted", _name(m.pod), m.file)
                else:
                    self._start_admission(record)
                changed = True
            elif known.manifest.digest != m.digest:
                changed |= self._manifest_changed(known, m)
        if changed:
            await self._save_state()

    def _manifest_changed(self, record: PodRecord, m: PodManifest) -> bool:
        """The same UID (set in metadata) with new content: only a Failed pod is tried again."""
        if m.succeeded and record.phase != "Succeeded":
            self._cancel_admission(record.uid)
            record.manifest, record.phase, record.reason, record.message = m, "Succeeded", "", ""
            record.run_options = {}
            self._release()
            log.info("pod %s succeeded: its devices were freed", _name(m.pod))
            return True
        if record.phase == "Failed":
            record.manifest, record.phase, record.reason, record.message = m, "Pending", "", ""
            self._start_admission(record)
            return True
        log.warning(
            "pod %s: manifest %s changed but a pod's spec cannot change; ignored", _name(m.pod), m.file
        )
        record.manifest = m
        return False

    def _terminate(self, record: PodRecord, why: str) -> None:
        self._cancel_admission(record.uid)
        self.pods.remove(record.uid)
        self._release()
        log.info("pod %s terminated (%s): its devices were freed", _name(record.pod), why)

    def _release(self) -> None:
        self._require_manager().update_allocated_devices(self.pods.active_uids())

    def _cancel_admission(self, uid: str) -> None:
        # Only a pod still waiting for devices is cancelled; an admission under way finishes, then the
        # pod's devices are garbage-collected like any terminated pod's.
        task = self._admissions.get(uid)
        if task is not None and uid in self._waiting:
            task.cancel()

    def _start_admission(self, record: PodRecord) -> None:
        task = asyncio.create_task(self._admit(record), name=f"admit {_name(record.pod)}")
        self._admissions[record.uid] = task
        task.add_done_callback(functools.partial(self._admission_done, record.uid))

    def _admission_done(self, uid: str, task: asyncio.Task[None]) -> None:
        if self._admissions.get(uid) is task:
            del self._admissions[uid]
        if not task.cancelled() and task.exception() is not None:
            log.error("admission of pod %s crashed", uid, exc_info=task.exception())

    async def _admit(self, record: PodRecord) -> None:
        manager = self._require_manager()
        if self.config.admission_wait > 0:
            self._waiting.add(record.uid)
            try:
                missing = await wait_for_devices(manager, record.pod, self.config.admission_wait)
            finally:
                self._waiting.discard(record.uid)
            if missing:
                log.info(
                    "pod %s waited %s; still missing: %s",
                    _name(record.pod),
                    format_duration(self.config.admission_wait),
                    "; ".join(f"{r}: {why}" for r, why in missing.items()),
                )
        async with contextlib.AsyncExitStack() as held:
            for resource in sorted(device_needs(record.pod)):  # one order: no deadlock between pods
                await held.enter_async_context(self._admission_locks.setdefault(resource, asyncio.Lock()))
            if self.pods.get(record.uid) is not record or record.phase != "Pending":
                return
            try:
                options = await admit(manager, record.pod)
            except DeviceManagerError as err:
                self._fail(record, str(err))
            else:
                record.run_options = options
                record.phase = "Running"
                self.metrics.admissions.inc()
                log.info("pod %s admitted: Running", _name(record.pod))
            if self.pods.get(record.uid) is not record or not record.active:
                self._release()  # removed while admitting, or failed part-way: free what it got
        if not record.active:
            # Only a pod that ended Failed changes the state file; a Running pod's devices are in the
            # checkpoint, and a removed pod was saved by the scan that removed it.
            await self._save_state()

    def _fail(self, record: PodRecord, message: str) -> None:
        record.phase, record.reason, record.message = "Failed", ADMISSION_ERROR_REASON, message
        record.run_options = {}
        self.metrics.admission_failures.inc()
        log.warning("pod %s failed admission: %s", _name(record.pod), message)

    def _report_bad_files(self, errors: dict[str, str]) -> None:
        for file, error in sorted(errors.items()):
            if self.bad_files.get(file) != error:
                log.error("manifest %s: %s", file, error)
        for file in sorted(set(self.bad_files) - set(errors)):
            log.info("manifest %s: no longer reported (fixed or removed)", file)
        self.bad_files = dict(errors)

    def _terminated_pods(self) -> dict[str, SavedPod]:
        """What the state file keeps: the Failed and Succeeded pods, which a restart must not admit.

        Pending and Running pods are left out: a restart admits them again anyway (a Running pod keeps
        the devices of its checkpoint entry), so rewriting the file for each admission bought nothing.
        """
        return {record.uid: record.saved() for record in self.pods if not record.active}

    async def _save_state(self) -> None:
        try:
            await self._state.save(self._terminated_pods())
        except OSError as err:
            log.error("cannot write the pod state file %s: %s", self.paths.state_file, err)

    # ------------------------------------------------------------------------------------------------
    # Node status

    async def _status_loop(self) -> None:
        manager = self._require_manager()
        while True:
            await asyncio.sleep(self.config.status_interval)
            # GetCapacity is what drops resources past their stop grace period; it logs them itself.
            manager.get_capacity()

    def active_pods(self) -> Sequence[Pod]:
        return [r.pod for r in self.pods if r.active]


def checkpoint_fault_from_env(env: Mapping[str, str]) -> Callable[[str], None] | None:
    """The crash-consistency tests' hook: kill this process inside a checkpoint write, seeded.

    Test-only and never configuration, hence an environment variable rather than a flag. A malformed
    value is a ValueError (the daemon refuses to start) rather than a test that silently kills nothing.
    """
    spec = env.get(CHECKPOINT_FAULT_ENV)
    if not spec:
        return None
    stage, _, rest = spec.partition(":")
    probability_text, _, seed_text = rest.partition(":")
    try:
        probability, seed = float(probability_text), int(seed_text)
    except ValueError:
        probability, seed = -1.0, 0
    if stage not in (*WRITE_STAGES, "any") or not 0.0 <= probability <= 1.0:
        raise ValueError(
            f"{CHECKPOINT_FAULT_ENV}={spec!r}: want STAGE:PROBABILITY:SEED with STAGE one of "
            f"{', '.join((*WRITE_STAGES, 'any'))} and PROBABILITY from 0 to 1"
        )
    rng = random.Random(seed)

    def fault(at: str) -> None:
        if stage in (at, "any") and rng.random() < probability:
            os.kill(os.getpid(), signal.SIGKILL)

    return fault


def _name(pod: Pod) -> str:
    return f"{pod.namespace}/{pod.name} ({pod.uid})"


def _make_dirs(paths: NodePaths) -> None:
    for directory in (
        paths.root,
        paths.plugin_dir,
        paths.plugins_registry,
        paths.pod_resources_socket.parent,
        paths.manifests,
    ):
        directory.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    for directory in (
        paths.root,
        paths.plugin_dir,
        paths.plugins_registry,
        paths.pod_resources_socket.parent,
    ):
        os.chmod(directory, _DIR_MODE)
