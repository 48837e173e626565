"""What a container gets from its claims: CDI device IDs (GetResources) and the claim infos PodResources
reports (GetContainerClaimInfos, GetDynamicResources)."""

from __future__ import annotations

from dataclasses import dataclass

from kubedevice.checkpoint.dra_model import ClaimInfoState
from kubedevice.dra.claim_info import ClaimInfoCache
from kubedevice.dra.claim_names import pod_claim_names, resolve
from kubedevice.dra.errors import ContainerClaimsError, DRAError
from kubedevice.dra.types import DRAContainer, DRAPod


def _claim_requests(pod: DRAPod, container: DRAContainer) -> dict[str, list[str]]:
    """claim name -> the container's requests of it ("" is every request), in pod-claim order, then the
    special claim of the container's extended resources."""
    wanted: dict[str, list[str]] = {}
    for claim in container.claims:
        wanted.setdefault(claim.name, []).append(claim.request)
    found: dict[str, list[str]] = {}
    for pod_claim in pod.resource_claims:
        if pod_claim.name not in wanted:
            continue
        name = resolve(pod, pod_claim)
        if name is not None:
            found.setdefault(name.claim_name, []).extend(wanted[pod_claim.name])
    special = pod.extended_resource_claim
    if special is not None:
        for mapping in special.request_mappings:
            if mapping.container_name == container.name:
                found.setdefault(special.resource_claim_name, []).append(mapping.request_name)
    return found


def get_resources(cache: ClaimInfoCache, pod: DRAPod, container: DRAContainer) -> list[str]:
    """The container's CDI device IDs: pod-claim order, the container's requests in order, drivers by name,
    devices as the driver returned them; an ID already listed is not repeated (the kubelet's order between
    claims is map order, and it repeats IDs)."""
    ids: dict[str, None] = {}
    for claim_name, requests in _claim_requests(pod, container).items():
        info = cache.get(pod.namespace, claim_name)
        if info is None:
            raise ContainerClaimsError(
                f"internal error: unable to get claim info for ResourceClaim {claim_name} "
                f"in namespace {pod.namespace}"
            )
        for request in requests:
            ids.update(dict.fromkeys(info.cdi_devices(request)))
    return list(ids)


def prepared_on_record(cache: ClaimInfoCache, pod: DRAPod) -> bool:
    """Every claim of the pod has an entry that lists the pod and holds what each of its drivers prepared.

    The cache pass writes an entry with the pod but no devices yet, and the commit adds them: so, read
    from a restored checkpoint, True means the pod's prepare finished. An entry whose driver prepared no
    device (nil in the checkpoint) cannot tell, nor can a pod without claims: False.
    """
    try:
        names = pod_claim_names(pod)
    except DRAError:
        return False
    for name in names:
        info = cache.get(pod.namespace, name.claim_name)
        if info is None or pod.uid not in info.pod_uids:
            return False
        if not info.driver_state or not all(info.driver_state.values()):
            return False
    return bool(names)


def get_container_claim_infos(
    cache: ClaimInfoCache, pod: DRAPod, container: DRAContainer
) -> list[ClaimInfoState]:
    """A snapshot of each claim the container uses, all devices of each (PodResources reads these)."""
    used = {claim.name for claim in container.claims}
    infos: list[ClaimInfoState] = []
    for pod_claim in pod.resource_claims:
        if pod_claim.name not in used:
            continue
        name = resolve(pod, pod_claim)
        if name is None:
            continue
        info = cache.get(pod.namespace, name.claim_name)
        if info is None:
            raise ContainerClaimsError(f"unable to get information for ResourceClaim {name.claim_name}")
        infos.append(info.to_state())
    special = pod.extended_resource_claim
    if special is not None and any(m.container_name == container.name for m in special.request_mappings):
        info = cache.get(pod.namespace, special.resource_claim_name)
        if info is None:
            raise ContainerClaimsError(
                f"unable to get claim info for claim {special.resource_claim_name} "
                f"in namespace {pod.namespace}"
            )
        infos.append(info.to_state())
    return infos


@dataclass(frozen=True, slots=True)
class ClaimResource:
    """PodResources v1 `ClaimResource`: one device of a claim."""

    driver_name: str
    pool_name: str
    device_name: str
    cdi_devices: tuple[str, ...]
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class DynamicResource:
    """PodResources v1 `DynamicResource`: one claim a container uses, with every device of the claim."""

    claim_name: str
    claim_namespace: str
    claim_resources: tuple[ClaimResource, ...]


def dynamic_resources(infos: list[ClaimInfoState]) -> list[DynamicResource]:
    """The kubelet's GetDynamicResources over a container's claim infos, quirk included: within one driver
    the CDI list keeps growing, so its k-th device carries the CDI IDs of devices 1..k (bug B9, copied so
    PodResources clients see what a kubelet sends; drivers in name order)."""
    found: list[DynamicResource] = []
    for info in infos:
        resources: list[ClaimResource] = []
        for driver in sorted(info.driver_state or {}):
            grown: list[str] = []
            for device in (info.driver_state or {})[driver] or ():
                grown.extend(device.cdi_device_ids or ())
                resources.append(
                    ClaimResource(driver, device.pool_name, device.device_name, tuple(grown), device.share_id)
                )
        found.append(DynamicResource(info.claim_name, info.namespace, tuple(resources)))
    return found
