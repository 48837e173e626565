"""The node daemon's DRA parts, made and started together, each given what it needs when it is made: the
control plane (the claim store in `dra_claims.json`, the ResourceSlice folder, whose files are all deleted
first: plugins publish again when they register), the DRA manager on the root's `dra_manager_state`
reading its claims from the control plane, and the kubelet's calls on it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubedevice.controlplane.claim_store import ClaimStoreError
from kubedevice.controlplane.plane import ControlPlane
from kubedevice.dra import DRACheckpointError, DRAManager, DynamicResource
from kubedevice.manager import Pod
from kubedevice.node.checkpoint_guard import REFUSED_HINT
from kubedevice.node.config import (
    CLAIM_STATE_FAULT_ENV,
    DRA_CHECKPOINT_FAULT_ENV,
    TAINT_STATE_FAULT_ENV,
    NodeConfig,
    NodePaths,
    NodeStartError,
    checkpoint_fault_from_env,
)
from kubedevice.node.dynamic_resources import DynamicResources

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubedevice.node.pods import PodTable


@dataclass(slots=True)
class DRAParts:
    control: ControlPlane
    manager: DRAManager
    dynamic: DynamicResources

    def dynamic_resources(self, pods: PodTable, pod: Pod, container: str) -> Sequence[DynamicResource]:
        """PodResources' `dynamic_resources` of one container of a pod the daemon knows: empty for a pod
        without claims and for one still waiting for them (the kubelet finds no claim info either)."""
        record = pods.get(pod.uid)
        if record is None or not record.has_claims or record.phase == "Pending":
            return []
        return self.dynamic.dynamic_resources(record.dra_pod, container)


async def start_dra(
    config: NodeConfig,
    paths: NodePaths,
    *,
    active_pods: Callable[[], Iterable[str]],
    registry: CollectorRegistry,
) -> DRAParts:
    """The started DRA parts; raises NodeStartError with one line when one of them cannot start."""
    try:
        fault = checkpoint_fault_from_env(os.environ, DRA_CHECKPOINT_FAULT_ENV)
        store_fault = checkpoint_fault_from_env(os.environ, CLAIM_STATE_FAULT_ENV)
        taint_fault = checkpoint_fault_from_env(os.environ, TAINT_STATE_FAULT_ENV)
    except ValueError as err:
        raise NodeStartError(str(err)) from None
    try:
        control = await ControlPlane.load(
            paths.root,
            paths.resourceslices,
            node_name=config.node_name,
            node_labels=config.labels,
            use_inotify=config.use_inotify,
            binding_timeout=config.dra_binding_timeout,
            fault=store_fault,
            taint_fault=taint_fault,
        )
    except ClaimStoreError as err:
        raise NodeStartError(str(err)) from None
    dra = DRAManager(
        paths.root,
        claims=control.claims,
        registry=registry,
        wipe_delay=config.dra_wipe_delay,
        reconcile_period=config.dra_reconcile_period,
        active_pods=active_pods,
        on_wipe=control.slices.wipe_driver,
        checkpoint_fault=fault,
    )
    try:
        await dra.start()
    except DRACheckpointError as err:
        hint = REFUSED_HINT if err.corrupt else "make the folder usable"
        raise NodeStartError(f"{dra.checkpoint_path}: {err} — {hint}") from None
    await control.start()
    return DRAParts(control, dra, DynamicResources(dra))
