"""PrepareResources: a pod's claims prepared by their drivers before its sandbox is created.

Four passes, as in the kubelet since 1.33: validation (nothing cached, so a pod that fails here can go
without any unprepare), the cache pass (the pod recorded on each claim and checkpointed before any call,
so a crash leaves an entry the reconcile pass can unprepare), one NodePrepareResources per plugin, and the
commit (claims marked prepared, checkpoint written before the caller may use the devices). The claims'
locks are held from the cache pass to the commit, so an unprepare of a shared claim never interleaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubedevice.cdi_names import CDIError, parse_qualified_name
from kubedevice.dra.claim_info import ClaimInfo, claim_key
from kubedevice.dra.claim_names import PodClaimName, check_owner, check_reserved, pod_claim_names
from kubedevice.dra.client import DRAPluginClient, PrepareResult
from kubedevice.dra.errors import DRACallError, DRAError
from kubedevice.dra.state import DRAState
from kubedevice.dra.types import ClaimNotFoundError, DRAPod, DriverClaim, ResourceClaim


@dataclass(frozen=True, slots=True)
class _Checked:
    """A claim that passed validation, with a plugin for each of its drivers."""

    claim: ResourceClaim
    plugins: dict[str, DRAPluginClient]


async def prepare_resources(state: DRAState, pod: DRAPod) -> list[DriverClaim]:
    """Prepare every claim the pod needs; returns the claims the drivers were asked for (possibly none).

    Raises DRAError with the kubelet's cause text (the caller wraps it as `prepare dynamic resources: ...`).
    """
    checked = [await _validate(state, pod, claim_name) for claim_name in pod_claim_names(pod)]
    keys = [claim_key(c.claim.namespace, c.claim.name) for c in checked]
    async with state.cache.locked(keys):
        batches, sent = await _record_pod(state, pod, checked)
        for plugin, refs in batches.values():
            _apply(state, plugin, refs, await _call(plugin, refs))
        for info in sent:
            info.prepared = True
        if sent:
            await state.writer.write("checkpoint ResourceClaim state")
    return [info.ref for info in sent]


async def _validate(state: DRAState, pod: DRAPod, claim_name: PodClaimName) -> _Checked:
    name = claim_name.claim_name
    try:
        claim = await state.claims.get_claim(pod.namespace, name)
    except (ClaimNotFoundError, DRAError) as err:
        raise DRAError(f"fetch ResourceClaim {name}: {err}") from None
    if claim_name.check_owner:
        check_owner(pod, claim)
    check_reserved(pod, claim)
    if claim.allocation is None:
        raise DRAError(f"ResourceClaim {claim.name}: not allocated")
    # The driver is looked up even for a claim already prepared: an absent driver means something is
    # wrong with the node, and failing before anything is cached keeps the pod deletable.
    plugins = {driver: state.plugins.get(driver) for driver in claim.allocation.drivers}
    return _Checked(claim, plugins)


async def _record_pod(
    state: DRAState, pod: DRAPod, checked: list[_Checked]
) -> tuple[dict[int, tuple[DRAPluginClient, list[DriverClaim]]], list[ClaimInfo]]:
    """The cache pass: each claim's entry gets the pod; the checkpoint is written before any call."""
    batches: dict[int, tuple[DRAPluginClient, list[DriverClaim]]] = {}
    sent: list[ClaimInfo] = []
    try:
        for item in checked:
            claim = item.claim
            info = state.cache.get(claim.namespace, claim.name)
            if info is None:
                info = ClaimInfo.from_claim(claim)
                state.cache.add(info)
            elif info.claim_uid != claim.uid:
                raise DRAError(
                    f"old ResourceClaim with same name {claim.name} and different UID {info.claim_uid} "
                    "still exists (previous pod force-deleted?!)"
                )
            info.add_pod(pod.uid)
            if info.prepared or info in sent:
                continue
            sent.append(info)
            for driver in info.driver_state:
                plugin = item.plugins.get(driver) or state.plugins.get(driver)
                batches.setdefault(id(plugin), (plugin, []))[1].append(info.ref)
    finally:
        # Whatever was recorded is written, also when a later claim failed: a pod on an entry that
        # only memory knows would be forgotten by a crash and never unprepared.
        await state.writer.write("checkpoint ResourceClaim cache")
    return batches, sent


async def _call(plugin: DRAPluginClient, refs: list[DriverClaim]) -> dict[str, PrepareResult]:
    try:
        return await plugin.node_prepare_resources(refs)
    except DRACallError as err:
        raise DRAError(f"NodePrepareResources: {err}") from None


def _apply(
    state: DRAState, plugin: DRAPluginClient, refs: list[DriverClaim], results: dict[str, PrepareResult]
) -> None:
    """One plugin's answer into the cache: its devices replace what it prepared before (bug B1 fixed)."""
    by_uid = {ref.uid: ref for ref in refs}
    for uid, result in results.items():
        ref = by_uid.get(uid)
        if ref is None:
            raise DRAError(f"NodePrepareResources returned result for unknown claim UID {uid}")
        if result.error:
            raise DRAError(f"NodePrepareResources failed for ResourceClaim {ref.name}: {result.error}")
        _check_cdi_ids(ref, result)
        info = state.cache.get(ref.namespace, ref.name)
        if info is None or info.claim_uid != uid:
            raise DRAError(
                f"internal error: unable to get claim info for ResourceClaim {ref.name} "
                f"in namespace {ref.namespace}"
            )
        info.set_devices(plugin.driver, result.devices)
    missing = len(refs) - len(results)
    if missing:
        raise DRAError(f"NodePrepareResources skipped {missing} ResourceClaims")


def _check_cdi_ids(ref: DriverClaim, result: PrepareResult) -> None:
    """A CDI ID no runtime could resolve fails the claim here, not later at container creation."""
    for device in result.devices:
        if not device.pool_name or not device.device_name:
            raise DRAError(
                f"NodePrepareResources returned a device without pool or device name for ResourceClaim "
                f"{ref.name}: pool {device.pool_name!r}, device {device.device_name!r}"
            )
        for cdi_id in device.cdi_device_ids or ():
            try:
                parse_qualified_name(cdi_id)
            except CDIError as err:
                raise DRAError(
                    "NodePrepareResources returned an invalid CDI device ID for ResourceClaim "
                    f"{ref.name}: {err}"
                ) from None
