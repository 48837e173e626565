"""The plain data the DRA manager speaks: pods and their claims in, claim infos and CDI device IDs out.

There is no Kubernetes client here: pods are given by the caller with the few fields the kubelet's DRA
manager reads, and claims come from a :class:`ClaimSource` (the node daemon's claim store, an API server
client, or a test's dictionary).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of `pod.spec.resourceClaims`: a claim by name, or a template the claim is made from."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerClaim:
    """One entry of `container.resources.claims`: a pod claim and optionally one of its requests."""

    name: str
    request: str = ""


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    claims: tuple[ContainerClaim, ...] = ()


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """`status.extendedResourceClaimStatus.requestMappings[]`: which request serves a container's resource."""

    container_name: str
    resource_name: str
    request_name: str


@dataclass(frozen=True, slots=True)
class ExtendedResourceClaimStatus:
    """The special claim that meets a pod's extended resources through DRA."""

    resource_claim_name: str
    request_mappings: tuple[RequestMapping, ...] = ()


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as the DRA manager sees it.

    `containers` holds init and app containers alike (names are unique in a pod). `claim_statuses` is
    `status.resourceClaimStatuses`: pod claim name -> the generated claim's name, or None when the pod
    needs no claim for it.
    """

    uid: str
    namespace: str
    name: str
    resource_claims: tuple[PodClaim, ...] = ()
    containers: tuple[Container, ...] = ()
    claim_statuses: Mapping[str, str | None] = field(default_factory=dict)
    extended_resource_claim: ExtendedResourceClaimStatus | None = None

    def container(self, name: str) -> Container | None:
        return next((c for c in self.containers if c.name == name), None)


@dataclass(frozen=True, slots=True)
class DeviceRequestAllocationResult:
    """One `status.allocation.devices.results[]` entry: the device a request got."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class AllocationResult:
    results: tuple[DeviceRequestAllocationResult, ...] = ()

    @property
    def drivers(self) -> list[str]:
        """The claim's drivers, each once, in the order of their first result."""
        return list(dict.fromkeys(r.driver for r in self.results))


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    """One `status.reservedFor[]` entry; the kubelet compares only the UID."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False
    #: Set on the references the claim controller writes: the owner is not deleted before the claim.
    block_owner_deletion: bool = False


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
class ClaimRef:
    """A claim as the DRAPlugin service names it (`Claim{namespace, uid, name}`)."""

    namespace: str
    uid: str
    name: str
