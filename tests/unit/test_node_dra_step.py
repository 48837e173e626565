"""The pod's DRA step end to end at the library level: manifests read as the daemon reads them, the
allocator, the claim state, templates, reservations and extended resources (scenarios 13, 15, 25, 26,
36, 37, and the claim's life around them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kubedevice.controlplane.claim_store import ClaimStoreFile, effective_claim
from kubedevice.controlplane.extended import EXTENDED_CLAIM_ANNOTATION, ExtendedRoutes, coexistence_warnings
from kubedevice.controlplane.pod_step import recorded_routes, restore_pod
from kubedevice.controlplane.reservation import release_pod
from kubedevice.controlplane.templates import NAME_ALPHABET, POD_CLAIM_NAME_ANNOTATION
from kubedevice.dra.errors import PREPARE_FAILED
from kubedevice.dra.types import ConsumerReference, OwnerReference, RequestMapping
from kubedevice.scheduler.request import UNSCHEDULABLE
from tests.dra_allocator_helpers import pool
from tests.dra_life_helpers import CLASS_GPU, Node, devices, pod_yaml, read


def claim_yaml(name: str, count: int = 1, mode: str = "ExactCount") -> str:
    exact = f"{{deviceClassName: gpu, allocationMode: {mode}" + (
        f", count: {count}}}" if mode == "ExactCount" else "}"
    )
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}}}\n"
        f"spec: {{devices: {{requests: [{{name: gpu, exactly: {exact}}}]}}}}\n"
    )


TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-tmpl}
spec:
  metadata: {labels: {app: train}, annotations: {note: x}}
  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
"""


def docs(*texts: str) -> str:
    return "---\n".join(texts)


def test_scenario_13_no_free_device_then_a_holder_goes() -> None:
    pods, documents = read(
        docs(
            CLASS_GPU,
            claim_yaml("a"),
            claim_yaml("b"),
            claim_yaml("c1"),
            pod_yaml("pa", ("gpu", "resourceClaimName", "a")),
            pod_yaml("pb", ("gpu", "resourceClaimName", "b")),
            pod_yaml("p", ("gpu", "resourceClaimName", "c1")),
        )
    )
    pa, pb, p = pods
    node = Node(documents, [pool("gpu-0", "gpu-1")])
    assert node.step(pa).ready and node.step(pb).ready
    waiting = node.step(p).waiting
    assert waiting is not None and waiting.reason == UNSCHEDULABLE
    assert waiting.message == (
        "cannot allocate all claims: "
        'ResourceClaim default/c1, request "gpu": 1 matching device(s) wanted, 0 free'
    )
    assert node.state.get("default/c1") is None  # nothing allocated, nothing reserved
    node.remove(pa)  # its claim is deallocated with its last reservation
    assert node.state.get("default/a") is None
    result = node.step(p)
    assert result.ready and devices(result, node) == {"c1": ["gpu-0"]}
    record = node.state.get("default/c1")
    assert record is not None and record.reserved_for == (ConsumerReference("pods", "p", p.uid),)


def test_scenario_15_template_claim_generated_owned_and_stable_across_restarts(tmp_path: Path) -> None:
    pods, documents = read(
        docs(CLASS_GPU, TEMPLATE, pod_yaml("p", ("gpu", "resourceClaimTemplateName", "gpu-tmpl")))
    )
    [p] = pods
    node = Node(documents, [pool("gpu-0", "gpu-1")], file=ClaimStoreFile(tmp_path))
    result = node.step(p)
    assert result.ready
    [name] = result.pod.claim_statuses.values()
    assert name is not None and name.startswith("p-gpu-") and len(name) == len("p-gpu-") + 5
    assert set(name[len("p-gpu-") :]) <= set(NAME_ALPHABET)
    assert result.pod.claim_statuses == {"gpu": name}
    record = node.state.get(f"default/{name}")
    assert record is not None and record.generated_for == p.uid
    claim = effective_claim(None, record)
    assert claim is not None
    assert claim.meta.owner_references == (
        OwnerReference("v1", "Pod", "p", p.uid, controller=True, block_owner_deletion=True),
    )
    assert claim.meta.labels == {"app": "train"}
    assert claim.meta.annotations == {"note": "x", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert [r.device for r in claim.allocation.results] == ["gpu-0"]  # type: ignore[union-attr]
    assert claim.reserved_for == (ConsumerReference("pods", "p", p.uid),)

    # A restart: the state file is read back; the running pod gets the same name and claim, unchanged.
    state = ClaimStoreFile(tmp_path).load()
    restored = restore_pod(p.pod, p.claims, state, documents)
    assert restored.pod.claim_statuses == {"gpu": name}
    assert not state.apply(restored.updates)  # documents rebuilt in memory; nothing to write
    again = effective_claim(None, state.get(f"default/{name}"))
    assert again == claim

    # The pod goes: its reservation, its allocation and the generated claim go with it.
    node.remove(p)
    assert node.state.records == {}
    assert ClaimStoreFile(tmp_path).load().records == {}


def test_scenario_15_missing_template_waits_with_the_kubelet_text_and_a_detail() -> None:
    pods, documents = read(docs(CLASS_GPU, pod_yaml("p", ("gpu", "resourceClaimTemplateName", "gpu-tmpl"))))
    node = Node(documents, [pool("gpu-0")])
    result = node.step(pods[0])
    assert result.waiting is not None
    assert result.waiting.reason == PREPARE_FAILED
    assert result.waiting.message == (
        'Failed to prepare dynamic resources: prepare dynamic resources: pod "default/p": '
        "ResourceClaim not created yet"
    )
    assert result.waiting.detail == "ResourceClaimTemplate default/gpu-tmpl not found"
    assert result.pod.claim_statuses == {}
    assert node.state.records == {}


def test_template_with_admin_access_is_refused_when_generated() -> None:
    template = TEMPLATE.replace("{deviceClassName: gpu}", "{deviceClassName: gpu, adminAccess: true}")
    pods, documents = read(
        docs(CLASS_GPU, template, pod_yaml("p", ("gpu", "resourceClaimTemplateName", "gpu-tmpl")))
    )
    node = Node(documents, [pool("gpu-0")])
    result = node.step(pods[0])
    assert result.waiting is not None and result.waiting.reason == UNSCHEDULABLE
    assert result.waiting.message.startswith("ResourceClaim default/p-gpu-")
    assert result.waiting.message.endswith(
        ": spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access to devices requires the "
        "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
    )
    assert node.state.records == {}


def test_scenario_25_extended_resource_through_dra() -> None:
    gpu_class = CLASS_GPU.replace("spec:\n", "spec:\n  extendedResourceName: example.com/gpu\n")
    pods, documents = read(docs(gpu_class, pod_yaml("p", limits="example.com/gpu: 1")))
    [p] = pods
    node = Node(documents, [pool("gpu-0", "gpu-1")])
    result = node.step(p)
    assert result.ready
    status = result.pod.extended_resource_claim
    assert status is not None
    assert status.resource_claim_name.startswith("p-extended-resources-")
    assert status.request_mappings == (RequestMapping("main", "example.com/gpu", "container-0-request-0"),)
    record = node.state.get(f"default/{status.resource_claim_name}")
    assert record is not None and record.extended_for == p.uid
    assert record.extended_resources == {"example.com/gpu": "gpu"}
    claim = effective_claim(None, record)
    assert claim is not None and claim.meta.annotations == {EXTENDED_CLAIM_ANNOTATION: "true"}
    assert [(r.request, r.device) for r in claim.allocation.results] == [  # type: ignore[union-attr]
        ("container-0-request-0", "gpu-0")
    ]
    assert node.routes[p.uid].dra == {"example.com/gpu": "gpu"}


def test_scenario_26_both_sources_the_device_plugin_serves() -> None:
    gpu_class = CLASS_GPU.replace("spec:\n", "spec:\n  extendedResourceName: example.com/gpu\n")
    pods, documents = read(docs(gpu_class, pod_yaml("p", limits="example.com/gpu: 1")))
    node = Node(documents, [pool("gpu-0")], plugin_resources=frozenset({"example.com/gpu"}))
    result = node.step(pods[0])
    assert result.ready and result.pod.extended_resource_claim is None
    assert node.state.records == {}
    assert coexistence_warnings(node.plugin_resources, documents) == [
        "extended resource example.com/gpu is offered by a device plugin and by DeviceClass gpu; "
        "the device plugin serves it"
    ]


def test_scenario_36_all_or_nothing_then_one_search() -> None:
    text = docs(
        CLASS_GPU,
        claim_yaml("c1"),
        claim_yaml("c2", count=2),
        pod_yaml("p", ("a", "resourceClaimName", "c1"), ("b", "resourceClaimName", "c2")),
    )
    pods, documents = read(text)
    node = Node(documents, [pool("gpu-0", "gpu-1")])
    waiting = node.step(pods[0]).waiting
    assert waiting is not None and waiting.message == (
        "cannot allocate all claims: no combination of free devices satisfies every request and constraint"
    )
    assert node.state.records == {}
    node.pools = [pool("gpu-0", "gpu-1", "gpu-2")]
    result = node.step(pods[0])
    assert result.ready
    assert devices(result, node) == {"c1": ["gpu-0"], "c2": ["gpu-1", "gpu-2"]}


def test_scenario_37_all_mode_with_a_device_in_use() -> None:
    text = docs(
        CLASS_GPU,
        claim_yaml("c1"),
        claim_yaml("c-all", mode="All"),
        pod_yaml("holder", ("gpu", "resourceClaimName", "c1")),
        pod_yaml("p", ("gpu", "resourceClaimName", "c-all")),
    )
    pods, documents = read(text)
    holder, p = pods
    node = Node(documents, [pool("gpu-0", "gpu-1")])
    assert node.step(holder).ready
    waiting = node.step(p).waiting
    assert waiting is not None and waiting.message == (
        "cannot allocate all claims: "
        'ResourceClaim default/c-all, request "gpu": all 2 matching device(s) wanted, 1 free'
    )
    assert node.state.get("default/c-all") is None
    node.remove(holder)
    result = node.step(p)
    assert result.ready and devices(result, node) == {"c-all": ["gpu-0", "gpu-1"]}


def test_shared_claim_stays_allocated_until_its_last_pod_is_unprepared() -> None:
    text = docs(
        CLASS_GPU,
        claim_yaml("c1"),
        pod_yaml("a", ("gpu", "resourceClaimName", "c1")),
        pod_yaml("b", ("gpu", "resourceClaimName", "c1")),
    )
    (a, b), documents = read(text)
    node = Node(documents, [pool("gpu-0")])
    assert node.step(a).ready and node.step(b).ready
    record = node.state.get("default/c1")
    assert record is not None and [r.name for r in record.reserved_for] == ["a", "b"]
    assert node.state.apply(release_pod(node.state, a.uid))
    record = node.state.get("default/c1")
    assert (
        record is not None
        and record.allocation is not None
        and [r.name for r in record.reserved_for] == ["b"]
    )
    node.state.apply(release_pod(node.state, b.uid))
    assert node.state.get("default/c1") is None


def test_user_written_allocation_and_reserved_for_are_kept() -> None:
    claim = claim_yaml("c1") + (
        "status:\n  allocation: {devices: {results: [{request: gpu, driver: gpu.example.com, pool: node-1, "
        "device: gpu-1}]}}\n"
    )
    reserved = claim_yaml("c2") + "status:\n  reservedFor: [{resource: pods, name: q, uid: Q}]\n"
    pods, documents = read(
        docs(
            CLASS_GPU,
            claim,
            reserved,
            pod_yaml("p", ("a", "resourceClaimName", "c1")),
            pod_yaml("q", ("b", "resourceClaimName", "c2"), uid="Q"),
        )
    )
    p, q = pods
    node = Node(documents, [pool("gpu-0", "gpu-1")])
    assert node.step(p).ready
    record = node.state.get("default/c1")
    assert record is not None and record.allocation is None  # the user's allocation is not copied
    assert effective_claim(documents.claims["default/c1"], record).reserved_for == (  # type: ignore[union-attr]
        ConsumerReference("pods", "p", p.uid),
    )
    assert node.step(q).ready
    # c2 gets gpu-0 (gpu-1 is the user's), and its reservedFor stays the user's list.
    c2 = effective_claim(documents.claims["default/c2"], node.state.get("default/c2"))
    assert c2 is not None and c2.reserved_for == (ConsumerReference("pods", "q", "Q"),)
    assert [r.device for r in c2.allocation.results] == ["gpu-0"]  # type: ignore[union-attr]


def test_missing_claim_document_waits_with_the_fetch_text() -> None:
    pods, documents = read(
        docs(
            CLASS_GPU,
            claim_yaml("c0"),
            pod_yaml("p", ("a", "resourceClaimName", "c0"), ("b", "resourceClaimName", "c1")),
        )
    )
    node = Node(documents, [pool("gpu-0")])
    waiting = node.step(pods[0]).waiting
    assert waiting is not None and waiting.reason == PREPARE_FAILED
    assert waiting.message == (
        "Failed to prepare dynamic resources: prepare dynamic resources: fetch ResourceClaim c1: "
        'resourceclaims.resource.k8s.io "c1" not found'
    )
    assert node.state.records == {}  # c0 is neither allocated nor reserved


def test_the_257th_pod_waits() -> None:
    text = docs(
        CLASS_GPU,
        claim_yaml("c1"),
        *(pod_yaml(f"p{i}", ("gpu", "resourceClaimName", "c1")) for i in range(257)),
    )
    pods, documents = read(text)
    node = Node(documents, [pool("gpu-0")])
    for manifest in pods[:256]:
        assert node.step(manifest).ready
    waiting = node.step(pods[256]).waiting
    assert waiting is not None and waiting.reason == UNSCHEDULABLE
    assert waiting.message == "ResourceClaim default/c1 is reserved for the maximum of 256 consumers"
    node.remove(pods[0])
    assert node.step(pods[256]).ready


def test_scenario_25_after_a_restart_the_decision_and_the_special_claim_come_back(tmp_path: Path) -> None:
    gpu_class = CLASS_GPU.replace("spec:\n", "spec:\n  extendedResourceName: example.com/gpu\n")
    pods, documents = read(docs(gpu_class, pod_yaml("p", limits="example.com/gpu: 1")))
    [p] = pods
    node = Node(documents, [pool("gpu-0", "gpu-1")], file=ClaimStoreFile(tmp_path))
    before = node.step(p)
    assert before.ready
    # After the restart a device plugin for the name registers: the running pod's decision does not flip.
    state = ClaimStoreFile(tmp_path).load()
    assert recorded_routes(state, p.pod) == ExtendedRoutes({"example.com/gpu": "gpu"})
    assert recorded_routes(state, dataclasses.replace(p.pod, uid="other")) is None
    restored = restore_pod(p.pod, p.claims, state, documents)
    assert restored.pod == before.pod
    assert not state.apply(restored.updates)
    status = restored.pod.extended_resource_claim
    assert status is not None
    claim = effective_claim(None, state.get(f"default/{status.resource_claim_name}"))
    assert claim is not None and [r.device for r in claim.allocation.results] == ["gpu-0"]  # type: ignore[union-attr]


def test_a_generated_claim_outlives_its_template_after_a_restart(tmp_path: Path) -> None:
    pods, documents = read(
        docs(CLASS_GPU, TEMPLATE, pod_yaml("p", ("gpu", "resourceClaimTemplateName", "gpu-tmpl")))
    )
    [p] = pods
    node = Node(documents, [pool("gpu-0")], file=ClaimStoreFile(tmp_path))
    name = node.step(p).pod.claim_statuses["gpu"]
    _, without_template = read(CLASS_GPU)
    state = ClaimStoreFile(tmp_path).load()
    restored = restore_pod(p.pod, p.claims, state, without_template)
    assert restored.pod.claim_statuses == {"gpu": name}
    state.apply(restored.updates)
    claim = effective_claim(None, state.get(f"default/{name}"))
    assert claim is not None and claim.meta.owner_references[0].uid == p.uid
    assert [r.device for r in claim.allocation.results] == ["gpu-0"]  # type: ignore[union-attr]
    # A new pod of the same template, though, waits for the template.
    waiting = Node(without_template, [pool("gpu-0")]).step(p).waiting
    assert waiting is not None and waiting.detail == "ResourceClaimTemplate default/gpu-tmpl not found"


def test_a_replaced_claim_document_waits_while_the_old_object_is_in_use() -> None:
    text = docs(CLASS_GPU, claim_yaml("c1"), pod_yaml("a", ("gpu", "resourceClaimName", "c1")))
    (a,), documents = read(text)
    node = Node(documents, [pool("gpu-0", "gpu-1")])
    assert node.step(a).ready
    old_uid = documents.claims["default/c1"].meta.uid
    # The document changes (a new UID, as deleting and re-creating it would give); pod b uses it.
    (b,), replaced = read(
        docs(CLASS_GPU, claim_yaml("c1", count=2), pod_yaml("b", ("gpu", "resourceClaimName", "c1")))
    )
    assert replaced.claims["default/c1"].meta.uid != old_uid
    node.documents = replaced
    waiting = node.step(b).waiting
    assert waiting is not None and waiting.reason == PREPARE_FAILED
    assert waiting.message == (
        "Failed to prepare dynamic resources: prepare dynamic resources: old ResourceClaim with same name c1 "
        f"and different UID {old_uid} still exists (previous pod force-deleted?!)"
    )
    node.remove(a)  # the old object is deallocated with its last pod; the new one is allocated afresh
    result = node.step(b)
    assert result.ready and devices(result, node) == {"c1": ["gpu-0", "gpu-1"]}


def test_a_recorded_extended_decision_wins_over_a_new_one() -> None:
    gpu_class = CLASS_GPU.replace("spec:\n", "spec:\n  extendedResourceName: example.com/gpu\n")
    pods, documents = read(docs(gpu_class, pod_yaml("p", limits="example.com/gpu: 1")))
    [p] = pods
    node = Node(documents, [pool("gpu-0")])
    first = node.step(p)
    # A device plugin registers; a new decision would give the name to it, but the pod keeps DRA.
    node.routes[p.uid] = ExtendedRoutes()
    again = node.step(p)
    assert again.ready and again.pod == first.pod
    assert recorded_routes(node.state, p.pod) == ExtendedRoutes({"example.com/gpu": "gpu"})
