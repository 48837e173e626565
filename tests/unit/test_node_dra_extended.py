"""DRA-backed extended resources: the routing decision, the special claim, the coexistence warning."""

from __future__ import annotations

from kubedevice.controlplane.extended import (
    EXTENDED_CLAIM_ANNOTATION,
    ExtendedRoutes,
    coexistence_warnings,
    route_extended_resources,
    special_claim,
    special_claim_name,
    without_dra_resources,
)
from kubedevice.controlplane.templates import hashed_suffix
from kubedevice.dra.types import OwnerReference, RequestMapping
from kubedevice.manager.types import Container, Pod
from kubedevice.resource.model import DeviceClassDocument, DRADocuments, ObjectMeta

GPU_CLASS = DeviceClassDocument(meta=ObjectMeta(name="gpu"), extended_resource_name="example.com/gpu")
NIC_CLASS = DeviceClassDocument(meta=ObjectMeta(name="nic"))
DOCS = DRADocuments(classes={"gpu": GPU_CLASS, "nic": NIC_CLASS})
IMPLICIT_NIC = "deviceclass.resource.kubernetes.io/nic"


def pod(*containers: Container, init: tuple[Container, ...] = ()) -> Pod:
    return Pod(uid="P", namespace="ml", name="p", init_containers=list(init), containers=list(containers))


def test_routes_device_plugin_first_then_a_class_then_the_device_manager() -> None:
    p = pod(
        Container("main", {"example.com/gpu": 1, IMPLICIT_NIC: 2, "example.com/fpga": 1}),
        Container("side", {"example.com/zero": 0}),
    )
    routes = route_extended_resources(p, frozenset(), DOCS)
    assert routes.dra == {"example.com/gpu": "gpu", IMPLICIT_NIC: "nic"}
    # A registered device plugin serves its name even if a class maps it (and even with 0 devices).
    routes = route_extended_resources(p, frozenset({"example.com/gpu"}), DOCS)
    assert routes.dra == {IMPLICIT_NIC: "nic"}
    assert not route_extended_resources(pod(Container("main", {"example.com/fpga": 1})), frozenset(), DOCS)


def test_the_device_manager_is_not_asked_for_dra_names() -> None:
    p = pod(
        Container("main", {"example.com/gpu": 1, "example.com/fpga": 1}),
        init=(Container("init", {"example.com/gpu": 2}),),
    )
    routes = route_extended_resources(p, frozenset(), DOCS)
    stripped = without_dra_resources(p, routes)
    assert stripped.containers[0].limits == {"example.com/fpga": 1}
    assert stripped.init_containers[0].limits == {}
    assert p.containers[0].limits == {"example.com/gpu": 1, "example.com/fpga": 1}  # the original is kept
    assert without_dra_resources(p, ExtendedRoutes()) is p


def test_the_special_claim() -> None:
    p = pod(
        Container("main", {"example.com/gpu": 2, IMPLICIT_NIC: 1}),
        Container("plain", {"example.com/fpga": 1}),
        Container("side", {"example.com/gpu": 1}),
        init=(Container("init", {IMPLICIT_NIC: 1}),),
    )
    made = special_claim(p, route_extended_resources(p, frozenset(), DOCS))
    assert made is not None
    name = "p-extended-resources-" + hashed_suffix("P\0extended")
    assert made.document.meta.name == name == special_claim_name("p", "P")
    assert made.document.meta.namespace == "ml"
    assert made.document.meta.annotations == {EXTENDED_CLAIM_ANNOTATION: "true"}
    assert made.document.meta.owner_references == (
        OwnerReference("v1", "Pod", "p", "P", controller=True, block_owner_deletion=True),
    )
    # i indexes init containers then app containers; j the container's DRA names sorted.
    requests = [
        (r.name, r.exactly.device_class_name, r.exactly.allocation_mode, r.exactly.count)  # type: ignore[union-attr]
        for r in made.document.spec.requests
    ]
    assert requests == [
        ("container-0-request-0", "nic", "ExactCount", 1),
        ("container-1-request-0", "nic", "ExactCount", 1),
        ("container-1-request-1", "gpu", "ExactCount", 2),
        ("container-3-request-0", "gpu", "ExactCount", 1),
    ]
    assert made.status.resource_claim_name == name
    assert made.status.request_mappings == (
        RequestMapping("init", IMPLICIT_NIC, "container-0-request-0"),
        RequestMapping("main", IMPLICIT_NIC, "container-1-request-0"),
        RequestMapping("main", "example.com/gpu", "container-1-request-1"),
        RequestMapping("side", "example.com/gpu", "container-3-request-0"),
    )
    assert special_claim(p, ExtendedRoutes()) is None


def test_a_long_pod_name_is_cut_as_the_api_server_cuts_it() -> None:
    name = special_claim_name("p" * 60, "P")
    assert name == ("p" * 60 + "-extended-resources-")[:58] + hashed_suffix("P\0extended")
    assert len(name) == 63


def test_coexistence_warnings() -> None:
    assert coexistence_warnings(["example.com/gpu", "example.com/fpga"], DOCS) == [
        "extended resource example.com/gpu is offered by a device plugin and by DeviceClass gpu; "
        "the device plugin serves it"
    ]
    assert coexistence_warnings([], DOCS) == []
