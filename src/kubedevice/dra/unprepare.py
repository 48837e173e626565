"""UnprepareResources and the reconcile pass: the last pod out of a claim unprepares it.

A pod leaving a shared claim only leaves its entry; the pod that leaves it empty has the claim's drivers
unprepare it, and the entry is deleted once every driver succeeded. An entry that does not list the pod
is never touched (kubelet bug B5, fixed: the deleted pod may never have been recorded on it).

Every call that succeeds ends with a checkpoint write, as the kubelet's does, also when it changed
nothing: an earlier call that failed may have left a change only memory knows (a pod dropped from a
shared entry before a driver call failed), so the file equals the cache after every successful call.
Until that write ends, the pod still counts as referenced (`ClaimInfoCache.leaving`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kubedevice.dra.claim_info import ClaimInfo, claim_key
from kubedevice.dra.claim_names import pod_claim_names
from kubedevice.dra.errors import DRACallError, DRAError
from kubedevice.dra.state import DRAState
from kubedevice.dra.types import DRAPod, DriverClaim

log = logging.getLogger(__name__)


async def unprepare_resources(state: DRAState, pod: DRAPod) -> list[DriverClaim]:
    """Unprepare the pod's claims; returns the claims the drivers were asked to unprepare.

    The names come from the cache entries that list the pod, else from its spec. Idempotent.
    """
    names = state.cache.claim_names_for_pod(pod.uid)
    if not names:
        names = [name.claim_name for name in pod_claim_names(pod)]
    return await unprepare_claims(state, pod.uid, pod.namespace, names)


async def unprepare_claims(
    state: DRAState, pod_uid: str, namespace: str, names: Iterable[str]
) -> list[DriverClaim]:
    names = list(dict.fromkeys(names))
    keys = [claim_key(namespace, name) for name in names]
    async with state.cache.locked(keys), state.cache.leaving(pod_uid):
        last_out: list[ClaimInfo] = []
        batches: dict[str, list[DriverClaim]] = {}
        for name in names:
            info = state.cache.get(namespace, name)
            if info is None or pod_uid not in info.pod_uids:
                continue
            if len(info.pod_uids) > 1:
                # Written with the end of this call: a crash before it repeats this idempotent call.
                info.remove_pod(pod_uid)
                continue
            last_out.append(info)
            for driver in info.driver_state:
                batches.setdefault(driver, []).append(info.ref)
        for driver in sorted(batches):
            await _call(state, driver, batches[driver])
        for info in last_out:
            state.cache.delete(info.namespace, info.claim_name)
        await state.writer.write("checkpoint ResourceClaim state")
    return [info.ref for info in last_out]


async def _call(state: DRAState, driver: str, refs: list[DriverClaim]) -> None:
    plugin = state.plugins.get(driver)
    try:
        results = await plugin.node_unprepare_resources(refs)
    except DRACallError as err:
        raise DRAError(f"NodeUnprepareResources: {err}") from None
    by_uid = {ref.uid: ref for ref in refs}
    for uid, error in results.items():
        ref = by_uid.get(uid)
        if ref is None:
            raise DRAError(f"NodeUnprepareResources returned result for unknown claim UID {uid}")
        if error:
            raise DRAError(f"NodeUnprepareResources failed for ResourceClaim {ref.name}: {error}")
    missing = len(refs) - len(results)
    if missing:
        raise DRAError(f"NodeUnprepareResources skipped {missing} ResourceClaims")


async def reconcile(state: DRAState, active_pod_uids: set[str]) -> int:
    """Unprepare the claims of pods that are gone; returns how many pods failed (retried next pass)."""
    failed = 0
    for pod_uid, (namespace, names) in state.cache.pods_with_claims().items():
        if pod_uid in active_pod_uids:
            continue
        try:
            await unprepare_claims(state, pod_uid, namespace, names)
        except DRAError as err:
            failed += 1
            log.info(
                "Unpreparing pod resources in reconcile loop failed, will retry: pod %s: %s", pod_uid, err
            )
    return failed
