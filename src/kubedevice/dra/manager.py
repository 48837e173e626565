"""DRAManager: the node side's DRA facade (the kubelet's `cm/dra` Manager).

It owns the claim-info cache, the checkpoint and the registered drivers, and runs the reconcile pass.
It knows nothing of the node daemon, manifests or HTTP: pods come from the caller, claims from a
ClaimSource, and drivers register through `plugin_handler`, which the caller gives to the plugins_registry
watcher (kubedevice.pluginwatcher) beside the device manager's handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from kubedevice.api import constants
from kubedevice.checkpoint import (
    CheckpointError,
    CheckpointFormatError,
    CorruptCheckpointError,
    DRACheckpointStore,
)
from kubedevice.checkpoint.dra_model import ClaimInfoState, DRACheckpointData
from kubedevice.dra import container_claims, prepare, resource_health, unprepare
from kubedevice.dra.checkpointing import StateWriter
from kubedevice.dra.claim_info import ClaimInfoCache
from kubedevice.dra.container_claims import DynamicResource
from kubedevice.dra.errors import (
    DRACheckpointError,
    DRAError,
    PrepareError,
    UnprepareError,
    unreadable_checkpoint_text,
)
from kubedevice.dra.health import DeviceHealthInfo
from kubedevice.dra.metrics import DRAMetrics
from kubedevice.dra.plugins import DRAPlugins, DriverStatus
from kubedevice.dra.registration import DRARegistrationHandler
from kubedevice.dra.resource_health import AllocatedResourceStatus
from kubedevice.dra.state import DRAState
from kubedevice.dra.types import ClaimSource, DRAContainer, DRAPod, DriverClaim
from kubedevice.tasks import cancel_and_wait
from kubedevice.wording import listed

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubedevice.pluginwatcher import PluginHandler

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class DRAManager:
    """The kubelet's DRA manager over a root directory that holds `dra_manager_state`.

    `claims` is where claims are read. `active_pods` gives the UIDs of the pods that exist; with it, a
    reconcile pass runs every `reconcile_period` seconds once `sources_ready` is True (and after each
    driver registration), unpreparing the claims of pods that are gone. `on_wipe(driver)` is called
    `wipe_delay` seconds after a driver's last plugin went away (its ResourceSlices should go).
    """

    def __init__(
        self,
        root_dir: Path | str,
        *,
        claims: ClaimSource,
        registry: CollectorRegistry | None = None,
        call_timeout: float = constants.DRA_CALL_TIMEOUT_S,
        wipe_delay: float = constants.DRA_WIPE_DELAY_S,
        reconcile_period: float = constants.DRA_RECONCILE_PERIOD_S,
        active_pods: Callable[[], Iterable[str]] | None = None,
        on_wipe: Callable[[str], None] | None = None,
        checkpoint_name: str = constants.DRA_CHECKPOINT_NAME,
        checkpoint_fault: Callable[[str], None] | None = None,
    ) -> None:
        self.root_dir = Path(root_dir)
        self.metrics = DRAMetrics(registry)
        self.reconcile_period = reconcile_period
        self._active_pods = active_pods
        self._store = DRACheckpointStore(self.root_dir, checkpoint_name, fault=checkpoint_fault)
        cache = ClaimInfoCache()
        plugins = DRAPlugins(
            metrics=self.metrics,
            call_timeout=call_timeout,
            wipe_delay=wipe_delay,
            on_wipe=on_wipe,
            on_registered=self._driver_registered,
            on_health_change=self._health_changed,
        )
        self._state = DRAState(cache, plugins, claims, StateWriter(self._store, cache.pieces))
        self._plugin_handler = DRARegistrationHandler(plugins)
        self._reconcile_task: asyncio.Task[None] | None = None
        self._reconcile_now = asyncio.Event()
        self._sources_ready = False
        self._status = "new"

    @property
    def checkpoint_path(self) -> Path:
        return self._store.path

    @property
    def plugin_handler(self) -> PluginHandler:
        """The handler of plugin type "DRAPlugin" for the plugins_registry watcher."""
        return self._plugin_handler

    async def start(self) -> None:
        """Restore the cache from the checkpoint (every entry unprepared) and start the reconcile loop.

        Raises DRACheckpointError with the kubelet's text when the file or its directory cannot be used;
        `.corrupt` tells an unreadable file (which may be moved aside) from an unusable directory.
        """
        if self._status != "new":
            raise RuntimeError(f"DRA manager already {self._status}")
        try:
            data = await asyncio.to_thread(self._read_checkpoint)
        except (CorruptCheckpointError, CheckpointFormatError) as err:
            self._status = "stopped"
            raise DRACheckpointError(
                unreadable_checkpoint_text(self._store.path.name, err), corrupt=True
            ) from None
        except CheckpointError as err:
            self._status = "stopped"
            raise DRACheckpointError(
                "could not initialize checkpoint manager, please drain node and remove DRA state file, "
                f"err: {err}",
                corrupt=False,
            ) from None
        self._state.cache.restore(data)
        self._status = "running"
        self._reconcile_task = asyncio.create_task(self._reconcile_loop(), name="dra-reconcile")
        log.info(
            "DRA manager started: %d claim(s) restored from %s", len(self._state.cache), self._store.path
        )

    def _read_checkpoint(self) -> DRACheckpointData:
        if self._store.path.parent.is_dir():
            # A write a crash cut short leaves its temporary file; the kubelet never removes them.
            removed = self._store.remove_stale_temp_files()
            if removed:
                log.info("removed %d temporary DRA checkpoint file(s) left by a crash", len(removed))
        return self._store.read_or_create()

    async def stop(self) -> None:
        """Stop the reconcile loop and close every plugin connection. Idempotent."""
        if self._status in ("stopping", "stopped"):
            return
        self._status = "stopping"
        await cancel_and_wait(self._reconcile_task)
        await self._state.plugins.stop()
        self._status = "stopped"

    async def __aenter__(self) -> DRAManager:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def sources_ready(self) -> bool:
        """While False, the reconcile pass does nothing: the caller does not know every pod yet."""
        return self._sources_ready

    @sources_ready.setter
    def sources_ready(self, ready: bool) -> None:
        self._sources_ready = ready
        if ready:
            self._reconcile_now.set()

    async def prepare_resources(self, pod: DRAPod) -> list[DriverClaim]:
        """Prepare the pod's claims before its sandbox is created (the kubelet's PrepareResources).

        Returns the claims the drivers were asked to prepare (none when all were prepared already).
        Raises PrepareError `prepare dynamic resources: <cause>`.
        """
        return await self._timed(
            "PrepareResources", prepare.prepare_resources(self._state, pod), PrepareError
        )

    async def unprepare_resources(self, pod: DRAPod) -> list[DriverClaim]:
        """Unprepare the pod's claims after its containers stopped; the last pod of a shared claim has
        it unprepared. Returns the claims unprepared.

        Raises UnprepareError `unprepare dynamic resources: <cause>`.
        """
        return await self._timed(
            "UnprepareResources", unprepare.unprepare_resources(self._state, pod), UnprepareError
        )

    async def _timed(self, operation: str, call: Awaitable[_T], error: type[DRAError]) -> _T:
        start = time.monotonic()
        failed = True
        try:
            result = await call
            failed = False
            return result
        except DRAError as err:
            raise error(f"{operation_prefix(operation)}: {err}") from None
        finally:
            self.metrics.operations.labels(operation, "true" if failed else "false").observe(
                time.monotonic() - start
            )

    def get_resources(self, pod: DRAPod, container: DRAContainer) -> list[str]:
        """The container's CDI device IDs from its claims (they come before the device manager's)."""
        return container_claims.get_resources(self._state.cache, pod, container)

    def get_container_claim_infos(self, pod: DRAPod, container: DRAContainer) -> list[ClaimInfoState]:
        return container_claims.get_container_claim_infos(self._state.cache, pod, container)

    def get_dynamic_resources(self, pod: DRAPod, container: DRAContainer) -> list[DynamicResource]:
        """PodResources' `dynamic_resources` of a container; empty when its claims are not in the cache
        (the kubelet logs that and returns nothing)."""
        try:
            infos = self.get_container_claim_infos(pod, container)
        except DRAError as err:
            log.info(
                "Unable to get container claim info state: pod %s container %s: %s",
                pod.uid,
                container.name,
                err,
            )
            return []
        return container_claims.dynamic_resources(infos)

    def pod_might_need_to_unprepare_resources(self, pod_uid: str) -> bool:
        """True while some claim entry lists the pod, or an unprepare's write of its removal is under way:
        the pod must not be forgotten yet."""
        return self._state.cache.has_pod_reference(pod_uid)

    def prepared_on_record(self, pod: DRAPod) -> bool:
        """The checkpoint shows the pod's claims prepared for it (container_claims.prepared_on_record):
        after a restart, what tells a pod that ran from one whose prepare a crash cut short."""
        return container_claims.prepared_on_record(self._state.cache, pod)

    def claim_infos(self) -> list[tuple[ClaimInfoState, bool]]:
        """Every cached claim and whether it is prepared in this run, sorted by namespace/name."""
        return [(info.to_state(), info.prepared) for info in self._state.cache.entries()]

    def drivers(self) -> list[DriverStatus]:
        return self._state.plugins.drivers()

    def device_health(self, driver: str) -> dict[tuple[str, str], DeviceHealthInfo]:
        """(pool, device) -> the health `driver`'s health stream reported (Unknown once stale)."""
        return self._state.plugins.device_health(driver)

    def allocated_resources_status(
        self, pod: DRAPod, container: DRAContainer
    ) -> list[AllocatedResourceStatus]:
        """The container's `allocatedResourcesStatus` entries from its claims: each claimed device and its
        health now (the kubelet's UpdateAllocatedResourcesStatus)."""
        health_of = self._state.plugins.health_of
        return resource_health.allocated_resources_status(self._state.cache, health_of, pod, container)

    def _health_changed(self, driver: str, devices: list[tuple[str, str]]) -> None:
        # The kubelet then updates these pods' status; ours is computed when asked, so this is the trace.
        pods = resource_health.pods_using(self._state.cache, driver, devices)
        if pods:
            shown = listed([f"{pool}/{device}" for pool, device in devices])
            log.info("DRA driver %s: health of %s changed, for pods %s", driver, shown, listed(pods))

    @property
    def checkpoint_writes(self) -> tuple[int, float]:
        """(writes, seconds spent in them) since start."""
        return self._state.writer.writes, self._state.writer.write_seconds

    async def reconcile(self) -> int:
        """One reconcile pass now (nothing while sources are not ready); returns how many pods failed."""
        if not self._sources_ready or self._active_pods is None:
            return 0
        return await unprepare.reconcile(self._state, set(self._active_pods()))

    def _driver_registered(self, driver: str) -> None:
        # Claims whose unprepare waited for this driver can go now, not a reconcile period later.
        self._reconcile_now.set()

    async def _reconcile_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reconcile_now.wait(), self.reconcile_period)
            self._reconcile_now.clear()
            await self.reconcile()


def operation_prefix(operation: str) -> str:
    return "prepare dynamic resources" if operation == "PrepareResources" else "unprepare dynamic resources"
