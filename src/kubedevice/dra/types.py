"""The plain data the DRA manager speaks: pods and their claims in, claim infos and CDI device IDs out.

There is no Kubernetes client here: pods are given by the caller with the few fields the kubelet's DRA
manager reads, and claims come from a :class:`ClaimSource` (the node daemon's claim store, an API server
client, or a test's dictionary).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kubedevice.resource.model import (
    AllocationResult,
    ConsumerReference,
    DeviceRequestAllocationResult,
    OwnerReference,
)
from kubedevice.resource.pod_claims import (
    ContainerClaim,
    ExtendedResourceClaimStatus,
    PodClaim,
    PodClaims,
    RequestMapping,
)

__all__ = [
    "AllocationResult",
    "ClaimNotFoundError",
    "ClaimSource",
    "ConsumerReference",
    "ContainerClaim",
    "DRAContainer",
    "DRAPod",
    "DeviceRequestAllocationResult",
    "ExtendedResourceClaimStatus",
    "OwnerReference",
    "PodClaim",
    "RequestMapping",
    "ResourceClaim",
]


@dataclass(frozen=True, slots=True)
class DRAContainer:
    """A container as the DRA manager sees it: its name and the pod claims (and requests) it uses."""

    name: str
    claims: tuple[ContainerClaim, ...] = ()


@dataclass(frozen=True, slots=True)
class DRAPod:
    """A pod as the DRA manager is handed it (the device manager is handed a `kubedevice.manager.Pod`).

    `containers` holds init and app containers alike (names are unique in a pod). `claim_statuses` is
    `status.resourceClaimStatuses`: pod claim name -> the generated claim's name, or None when the pod
    needs no claim for it.
    """

    uid: str
    namespace: str
    name: str
    resource_claims: tuple[PodClaim, ...] = ()
    containers: tuple[DRAContainer, ...] = ()
    claim_statuses: Mapping[str, str | None] = field(default_factory=dict)
    extended_resource_claim: ExtendedResourceClaimStatus | None = None

    @classmethod
    def from_claims(
        cls,
        uid: str,
        namespace: str,
        name: str,
        claims: PodClaims,
        claim_statuses: Mapping[str, str | None] | None = None,
        extended_resource_claim: ExtendedResourceClaimStatus | None = None,
    ) -> DRAPod:
        """The pod as the DRA manager sees it, from its DRA fields; the statuses are the caller's (the
        resource claim controller writes `status.resourceClaimStatuses`)."""
        return cls(
            uid=uid,
            namespace=namespace,
            name=name,
            resource_claims=claims.resource_claims,
            containers=tuple(DRAContainer(name=n, claims=c) for n, c in claims.container_claims),
            claim_statuses=dict(claim_statuses or {}),
            extended_resource_claim=extended_resource_claim,
        )

    def container(self, name: str) -> DRAContainer | None:
        return next((c for c in self.containers if c.name == name), None)


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """The parts of a `resource.k8s.io` ResourceClaim the DRA manager reads."""

    namespace: str
    name: str
    uid: str
    allocation: AllocationResult | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()
    owner_references: tuple[OwnerReference, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class ClaimNotFoundError(Exception):
    """No claim of that name: the API's NotFound text, as the kubelet passes it on."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(f'resourceclaims.resource.k8s.io "{name}" not found')
        self.namespace = namespace
        self.name = name


class ClaimSource(Protocol):
    """Where the DRA manager reads claims (the kubelet reads them from the API server)."""

    async def get_claim(self, namespace: str, name: str) -> ResourceClaim:
        """The claim as it is now; raises ClaimNotFoundError when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class DriverClaim:
    """A claim as the DRAPlugin service names it (`Claim{namespace, uid, name}`)."""

    namespace: str
    uid: str
    name: str
