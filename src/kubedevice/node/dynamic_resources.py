"""The kubelet stand-in's calls on its DRA manager (the kubelet's PrepareDynamicResources and
UnprepareDynamicResources around its container manager), each answering an outcome.

The pod path (node.pod_sync) asks the control plane what a pod's claims are, then comes here: `prepare`
before the containers start, `run_options` for each container's CDI IDs, `unprepare` once a removed pod's
containers are gone. A failure is returned as the pod's status message, never written here: the pod path
alone writes a pod's status. Pods without claims never come here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import overload

from kubedevice.checkpoint.dra_model import ClaimInfoState
from kubedevice.dra import DRAManager, DynamicResource, PrepareError, UnprepareError
from kubedevice.dra.types import DRAPod
from kubedevice.manager import RunContainerOptions
from kubedevice.pluginwatcher import PluginHandler
from kubedevice.tasks import Signal

__all__ = ["DynamicResources"]

log = logging.getLogger("kubedevice.node.daemon")

RunOptions = dict[str, RunContainerOptions | None]


class _RegistrationTap:
    """The DRA manager's plugin handler, firing `registered` after each driver registered."""

    def __init__(self, inner: PluginHandler, registered: Signal) -> None:
        self._inner = inner
        self._registered = registered

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        self._inner.validate_plugin(name, endpoint, versions)

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        await self._inner.register_plugin(name, endpoint, versions)
        self._registered.fire()

    async def deregister_plugin(self, name: str, endpoint: str) -> None:
        await self._inner.deregister_plugin(name, endpoint)


class DynamicResources:
    """The daemon's pods on one DRA manager."""

    def __init__(self, manager: DRAManager) -> None:
        self.manager = manager
        #: Fires after a DRA driver registered: a failed prepare or unprepare is worth trying again.
        self.registered = Signal()

    def plugin_handler(self) -> PluginHandler:
        """The DRA manager's handler for the plugins_registry watcher; it also fires `registered`."""
        return _RegistrationTap(self.manager.plugin_handler, self.registered)

    async def prepare(self, pod: DRAPod) -> str | None:
        """PrepareResources: None once the pod's claims are prepared, else the pod's status message (reason
        `FailedPrepareDynamicResources`)."""
        try:
            await self.manager.prepare_resources(pod)
        except PrepareError as err:
            return f"Failed to prepare dynamic resources: {err}"
        return None

    async def unprepare(self, pod: DRAPod) -> str | None:
        """UnprepareResources: None once done, else the pod's status message (reason
        `FailedUnprepareDynamicResources`)."""
        try:
            await self.manager.unprepare_resources(pod)
        except UnprepareError as err:
            return str(err)
        return None

    def needs_unprepare(self, pod_uid: str) -> bool:
        """A claim entry lists the pod: it must be unprepared before it can go."""
        return self.manager.pod_might_need_to_unprepare_resources(pod_uid)

    def prepared_on_record(self, pod: DRAPod) -> bool:
        """The DRA checkpoint alone shows the pod's claims prepared for it: a restart knows from that that
        the pod ran, as it knows a pod with a device checkpoint entry did."""
        return self.manager.prepared_on_record(pod)

    def cache(self) -> Sequence[ClaimInfoState]:
        """The claim-info cache, copied on first read (only an allocation reads it)."""
        return _CacheOnDemand(self.manager)

    def reconcile_soon(self) -> None:
        """A pod removed while its prepare ran: the reconcile pass unprepares what the prepare recorded."""
        task = asyncio.create_task(self.manager.reconcile(), name="dra reconcile")
        task.add_done_callback(_log_failure)

    def run_options(self, pod: DRAPod, options: RunOptions) -> RunOptions:
        """Each container's run options with its DRA CDI IDs first, then the device manager's, each ID
        once. Raises DRAError when a claim of the pod is not in the DRA manager's cache."""
        out: RunOptions = {}
        for name, opts in options.items():
            container = pod.container(name)
            ids = self.manager.get_resources(pod, container) if container is not None else []
            if not ids:
                out[name] = opts
                continue
            base = opts if opts is not None else RunContainerOptions()
            out[name] = dataclasses.replace(base, cdi_devices=list(dict.fromkeys([*ids, *base.cdi_devices])))
        return out

    def dynamic_resources(self, pod: DRAPod, container: str) -> list[DynamicResource]:
        """PodResources' `dynamic_resources` of one container of a pod whose claims are prepared."""
        c = pod.container(container)
        return self.manager.get_dynamic_resources(pod, c) if c is not None else []


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("DRA reconcile pass failed", exc_info=task.exception())


class _CacheOnDemand(Sequence[ClaimInfoState]):
    """The DRA manager's claim-info cache, copied when first read: the copy costs O(claims), which a burst
    of pods with allocated claims would otherwise pay per pod."""

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
