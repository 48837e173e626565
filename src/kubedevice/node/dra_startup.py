"""The node daemon's DRA parts, made and started together: the DRA manager on the root's
dra_manager_state, the pod flow's DRA step with the daemon's own claim state (dra_claims.json), and the
ResourceSlice folder (every file there deleted first: plugins publish again when they register)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubedevice.controlplane.claim_store import ClaimStoreError, ClaimStoreFile
from kubedevice.controlplane.slice_folder import SliceFolder
from kubedevice.dra import DRACheckpointError, DRAManager, DynamicResource
from kubedevice.manager import Pod
from kubedevice.node.checkpoint_guard import REFUSED_HINT
from kubedevice.node.config import (
    DRA_CHECKPOINT_FAULT_ENV,
    NodeConfig,
    NodePaths,
    NodeStartError,
    checkpoint_fault_from_env,
)
from kubedevice.node.dynamic_resources import DRAFlow

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubedevice.node.pods import PodTable


@dataclass(slots=True)
class DRAParts:
    manager: DRAManager
    flow: DRAFlow
    slices: SliceFolder

    def dynamic_resources(self, pods: PodTable, pod: Pod, container: str) -> Sequence[DynamicResource]:
        """PodResources' `dynamic_resources` of one container of a pod the daemon knows."""
        record = pods.get(pod.uid)
        return [] if record is None else self.flow.dynamic_resources(record, container)

    async def stop_flow(self) -> None:
        """Stop what reacts to pods and slices; the manager goes last, after the servers that read it."""
        await self.flow.stop()
        await self.slices.stop()


async def start_dra(
    config: NodeConfig,
    paths: NodePaths,
    *,
    known_pods: Callable[[], Collection[str]],
    active_pods: Callable[[], Iterable[str]],
    registry: CollectorRegistry,
) -> DRAParts:
    """The started DRA parts; raises NodeStartError with one line when one of them cannot start."""
    slices = SliceFolder(paths.resourceslices, config.node_name, use_inotify=config.use_inotify)
    try:
        fault = checkpoint_fault_from_env(os.environ, DRA_CHECKPOINT_FAULT_ENV)
    except ValueError as err:
        raise NodeStartError(str(err)) from None
    state_file = ClaimStoreFile(paths.root)
    try:
        state = await asyncio.to_thread(state_file.load)
    except ClaimStoreError as err:
        raise NodeStartError(str(err)) from None
    flow = DRAFlow(
        state,
        state_file,
        node_name=config.node_name,
        pools=slices.pools,
        known_pods=known_pods,
        retry_period=config.dra_retry_period,
        reconcile_period=config.dra_reconcile_period,
    )
    dra = DRAManager(
        paths.root,
        claims=flow.claims,
        registry=registry,
        wipe_delay=config.dra_wipe_delay,
        reconcile_period=config.dra_reconcile_period,
        active_pods=active_pods,
        on_wipe=slices.wipe_driver,
        checkpoint_fault=fault,
    )
    try:
        await dra.start()
    except DRACheckpointError as err:
        hint = REFUSED_HINT if err.corrupt else "make the folder usable"
        raise NodeStartError(f"{dra.checkpoint_path}: {err} — {hint}") from None
    flow.manager = dra
    slices.on_change = flow.changed
    await slices.start()
    return DRAParts(dra, flow, slices)
