"""A container naming a request its claim does not have: the pod's warning, worded once per request."""

from __future__ import annotations

from kubedevice.dra.types import ContainerClaim, DRAContainer, DRAPod, PodClaim
from kubedevice.node.admission import unknown_requests
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    DeviceRequestAllocationResult,
    ObjectMeta,
    ResourceClaimSpec,
)

GPU = "gpu.example.com"


def claim(name: str, *requests: str, allocated: bool = True) -> ClaimDocument:
    results = tuple(
        DeviceRequestAllocationResult(r, GPU, "node-1", f"gpu-{i}") for i, r in enumerate(requests)
    )
    return ClaimDocument(
        ObjectMeta(name, "default"), ResourceClaimSpec(), AllocationResult(results) if allocated else None
    )


def pod(*containers: tuple[str, tuple[ContainerClaim, ...]]) -> DRAPod:
    return DRAPod(
        uid="p-uid",
        namespace="default",
        name="p",
        resource_claims=(PodClaim("g", resource_claim_name="c1"),),
        containers=tuple(DRAContainer(name, claims) for name, claims in containers),
    )


def test_a_request_the_allocation_lacks_is_one_warning_a_subrequests_request_is_not() -> None:
    claims = {"c1": claim("c1", "gpu/large", "nic")}
    found = unknown_requests(
        pod(
            ("main", (ContainerClaim("g", "nosuch"), ContainerClaim("g", "gpu"))),
            ("side", (ContainerClaim("g", "nic"), ContainerClaim("g"))),
        ),
        lambda _namespace, name: claims.get(name),
    )
    assert found == [
        "claim g, request nosuch: ResourceClaim c1 has no such request (its requests: gpu, nic); "
        "container main runs without it"
    ]


def test_nothing_is_said_of_a_claim_not_allocated_or_gone() -> None:
    used = pod(("main", (ContainerClaim("g", "nosuch"),)))
    assert unknown_requests(used, lambda _n, _name: None) == []
    assert unknown_requests(used, lambda _n, _name: claim("c1", "gpu", allocated=False)) == []
