"""Which claims a pod needs: `pod.spec.resourceClaims` resolved to claim names (`resourceclaim.Name` of
k8s.io/dynamic-resource-allocation), plus the special claim of DRA-backed extended resources."""

from __future__ import annotations

from dataclasses import dataclass

from kubedevice.dra.errors import DRAError
from kubedevice.dra.types import DRAPod, PodClaim, ResourceClaim


@dataclass(frozen=True, slots=True)
class PodClaimName:
    """A pod claim resolved: the claim's name, and whether the claim must be owned by the pod (templates)."""

    pod_claim: str
    claim_name: str
    check_owner: bool


def resolve(pod: DRAPod, pod_claim: PodClaim) -> PodClaimName | None:
    """The claim a pod claim names; None when the pod needs no claim for it (a null status entry)."""
    if pod_claim.resource_claim_name is not None:
        return PodClaimName(pod_claim.name, pod_claim.resource_claim_name, check_owner=False)
    if pod_claim.resource_claim_template_name is not None:
        if pod_claim.name not in pod.claim_statuses:
            raise DRAError(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
        generated = pod.claim_statuses[pod_claim.name]
        return None if generated is None else PodClaimName(pod_claim.name, generated, check_owner=True)
    raise DRAError(
        f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{pod_claim.name}": '
        "none of the supported fields are set"
    )


def pod_claim_names(pod: DRAPod) -> list[PodClaimName]:
    """Every claim the pod needs, in spec order, then the special claim of its extended resources."""
    names = [name for c in pod.resource_claims if (name := resolve(pod, c)) is not None]
    if pod.extended_resource_claim is not None:
        names.append(PodClaimName("", pod.extended_resource_claim.resource_claim_name, check_owner=False))
    return names


def check_owner(pod: DRAPod, claim: ResourceClaim) -> None:
    """A claim made from a template must be in the pod's namespace and controlled by the pod."""
    owned = claim.namespace == pod.namespace and any(
        ref.controller and ref.uid == pod.uid for ref in claim.owner_references
    )
    if not owned:
        raise DRAError(
            f"ResourceClaim {claim.namespace}/{claim.name} was not created for pod "
            f"{pod.namespace}/{pod.name} (pod is not owner)"
        )


def check_reserved(pod: DRAPod, claim: ResourceClaim) -> None:
    """The claim must be reserved for the pod; the kubelet compares only the UID."""
    if not any(ref.uid == pod.uid for ref in claim.reserved_for):
        raise DRAError(
            f"pod {pod.name} ({pod.uid}) is not allowed to use ResourceClaim {claim.name} ({claim.uid})"
        )
