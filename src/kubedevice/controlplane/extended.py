"""DRA-backed extended resources: `limits: {example.com/gpu: 1}` met by a DRA driver (KEP-5004).

Per extended resource of a pod, once, at admission: a device plugin registered for the name serves it
(even with no healthy device); else a DeviceClass that maps the name (its `extendedResourceName`, or the
implicit `deviceclass.resource.kubernetes.io/<class>`) makes it DRA's; else the device manager's path
goes on as before. The DRA names of a pod become one special claim, owned by the pod, with one request per
(container, resource), allocated with the pod's other claims (last) and named in the pod's
`status.extendedResourceClaimStatus`. A decision made for a running pod never flips: the caller keeps the
routes and passes them back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

from kubedevice.controlplane.templates import (
    PodRef,
    generated_uid,
    hashed_suffix,
    pod_owner_reference,
    truncate_generate_name,
)
from kubedevice.dra.types import ExtendedResourceClaimStatus, RequestMapping
from kubedevice.manager.types import Container, Pod
from kubedevice.resource.model import (
    ClaimDocument,
    DeviceRequest,
    DRADocuments,
    ExactDeviceRequest,
    ObjectMeta,
    ResourceClaimSpec,
)

__all__ = [
    "EXTENDED_CLAIM_ANNOTATION",
    "ExtendedRoutes",
    "SpecialClaim",
    "coexistence_warnings",
    "route_extended_resources",
    "special_claim",
    "special_claim_name",
    "without_dra_resources",
]

#: The annotation that marks the special claim of a pod's DRA-backed extended resources.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


@dataclass(frozen=True, slots=True)
class ExtendedRoutes:
    """Where each extended resource of one pod goes: `dra` maps a DRA-backed name to its DeviceClass;
    every other name of the pod stays with the device manager (a device plugin, or its usual failure)."""

    dra: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.dra)


@dataclass(frozen=True, slots=True)
class SpecialClaim:
    """The pod's special claim and the status that names it."""

    document: ClaimDocument
    status: ExtendedResourceClaimStatus


def _containers(pod: Pod) -> list[Container]:
    """Init containers, then app containers: the order the request names index."""
    return [*pod.init_containers, *pod.containers]


def route_extended_resources(pod: Pod, plugin_resources: Set[str], documents: DRADocuments) -> ExtendedRoutes:
    """The decision for each extended resource in the pod's limits (make it once, at admission).

    `plugin_resources`: the names a device plugin is registered for with the device manager.
    """
    names = sorted({name for c in _containers(pod) for name, count in c.limits.items() if count > 0})
    routes: dict[str, str] = {}
    for name in names:
        if name in plugin_resources:
            continue
        device_class = documents.class_for(name)
        if device_class is not None:
            routes[name] = device_class.meta.name
    return ExtendedRoutes(routes)


def without_dra_resources(pod: Pod, routes: ExtendedRoutes) -> Pod:
    """The pod as the device manager must see it: the DRA-backed names removed from every limit."""
    if not routes:
        return pod

    def strip(c: Container) -> Container:
        limits = {k: v for k, v in c.limits.items() if k not in routes.dra}
        return dataclasses.replace(c, limits=limits)

    return dataclasses.replace(
        pod,
        init_containers=[strip(c) for c in pod.init_containers],
        containers=[strip(c) for c in pod.containers],
    )


def special_claim_name(pod_name: str, pod_uid: str) -> str:
    """`<pod>-extended-resources-` (cut as the API server cuts a generateName) and a stable suffix."""
    return truncate_generate_name(f"{pod_name}-extended-resources-") + hashed_suffix(f"{pod_uid}\0extended")


def special_claim(pod: Pod, routes: ExtendedRoutes) -> SpecialClaim | None:
    """The special claim for the pod's DRA-backed names, or None when it has none.

    One request per (container, name), `container-<i>-request-<j>`: `i` indexes init containers then app
    containers, `j` the container's DRA-backed names sorted; each asks for `limit` devices of the class.
    """
    if not routes:
        return None
    requests: list[DeviceRequest] = []
    mappings: list[RequestMapping] = []
    for i, container in enumerate(_containers(pod)):
        names = sorted(n for n, count in container.limits.items() if n in routes.dra and count > 0)
        for j, name in enumerate(names):
            request = f"container-{i}-request-{j}"
            exact = ExactDeviceRequest(
                device_class_name=routes.dra[name],
                allocation_mode="ExactCount",
                count=container.limits[name],
            )
            requests.append(DeviceRequest(name=request, exactly=exact))
            mappings.append(RequestMapping(container.name, name, request))
    if not requests:
        return None
    ref = PodRef(pod.namespace, pod.name, pod.uid)
    name = special_claim_name(pod.name, pod.uid)
    meta = ObjectMeta(
        name=name,
        namespace=pod.namespace,
        uid=generated_uid(pod.namespace, name, pod.uid),
        annotations={EXTENDED_CLAIM_ANNOTATION: "true"},
        owner_references=(pod_owner_reference(ref),),
    )
    document = ClaimDocument(meta=meta, spec=ResourceClaimSpec(requests=tuple(requests)))
    return SpecialClaim(document, ExtendedResourceClaimStatus(name, tuple(mappings)))


def coexistence_warnings(plugin_resources: Iterable[str], documents: DRADocuments) -> list[str]:
    """The `/node` warnings for names offered both by a device plugin and by a DeviceClass, sorted."""
    registered = set(plugin_resources)
    return sorted(
        f"extended resource {c.extended_resource_name} is offered by a device plugin and by "
        f"DeviceClass {c.meta.name}; the device plugin serves it"
        for c in documents.classes.values()
        if c.extended_resource_name is not None and c.extended_resource_name in registered
    )
