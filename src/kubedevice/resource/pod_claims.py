"""A pod's DRA fields (core/v1 Pod): `spec.resourceClaims`, each container's `resources.claims`, and the
`status` fields that name the claims made for it; and reading them from a pod document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubedevice.resource.fields import Fields


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
class PodClaims:
    """A node pod's DRA fields: `spec.resourceClaims` and each container's `resources.claims`."""

    resource_claims: tuple[PodClaim, ...] = ()
    #: container name -> its `resources.claims`, init containers first, in spec order; every container
    #: of the pod is listed, with () when it uses no claim.
    container_claims: tuple[tuple[str, tuple[ContainerClaim, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.resource_claims)


def read_pod_claims(
    f: Fields, spec: Mapping[str, Any], containers: Sequence[tuple[str, str, Mapping[str, Any]]]
) -> PodClaims:
    """The pod's claims; `containers` is (path, name, container) for init containers then app ones.

    A container may name only the pod's own claims, each once per request, as the API server checks.
    """
    claims: list[PodClaim] = []
    for i, raw in enumerate(f.items(spec.get("resourceClaims"), "spec.resourceClaims")):
        at = f"spec.resourceClaims[{i}]"
        entry = f.mapping(raw, at)
        name = f.dns_label(entry.get("name"), f"{at}.name")
        if any(c.name == name for c in claims):
            raise f.error(f"{at}.name", f"{name!r} is used by another pod claim")
        claim_name = f.string(entry.get("resourceClaimName"), f"{at}.resourceClaimName") or None
        template = f.string(entry.get("resourceClaimTemplateName"), f"{at}.resourceClaimTemplateName") or None
        if (claim_name is None) == (template is None):
            raise f.error(at, "exactly one of resourceClaimName or resourceClaimTemplateName must be set")
        if claim_name is not None:
            f.dns_subdomain(claim_name, f"{at}.resourceClaimName")
        if template is not None:
            f.dns_subdomain(template, f"{at}.resourceClaimTemplateName")
        claims.append(PodClaim(name, claim_name, template))
    known = {c.name for c in claims}
    per_container: list[tuple[str, tuple[ContainerClaim, ...]]] = []
    for path, container_name, container in containers:
        resources = f.mapping(container.get("resources"), f"{path}.resources")
        at = f"{path}.resources.claims"
        used: list[ContainerClaim] = []
        for j, raw in enumerate(f.items(resources.get("claims"), at)):
            entry = f.mapping(raw, f"{at}[{j}]")
            name = f.string(entry.get("name"), f"{at}[{j}].name", required=True)
            if name not in known:
                raise f.error(f"{at}[{j}].name", f"{name!r} is not one of the pod's spec.resourceClaims")
            request = f.string(entry.get("request"), f"{at}[{j}].request")
            claim = ContainerClaim(name, request)
            if claim in used:
                raise f.error(f"{at}[{j}]", "is listed twice")
            used.append(claim)
        per_container.append((container_name, tuple(used)))
    return PodClaims(tuple(claims), tuple(per_container))
