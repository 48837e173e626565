"""Generated claims: the claim controller's name rule, the claim made from a template, the texts."""

from __future__ import annotations

import pytest

from kubedevice.controlplane.templates import (
    NAME_ALPHABET,
    POD_CLAIM_NAME_ANNOTATION,
    ClaimNotCreated,
    PodRef,
    claim_from_template,
    generated_claim_name,
    hashed_suffix,
    missing_template,
    template_for,
)
from kubedevice.dra.types import OwnerReference
from kubedevice.resource.model import ClaimTemplateDocument, DeviceRequest, ExactDeviceRequest, ObjectMeta
from kubedevice.resource.model import ResourceClaimSpec as Spec


def test_short_names_keep_both_parts() -> None:
    name = generated_claim_name("p", "P-UID", "gpu")
    assert name == "p-gpu-" + hashed_suffix("P-UID\0gpu")
    assert len(hashed_suffix("x")) == 5 and set(hashed_suffix("x")) <= set(NAME_ALPHABET)


def test_the_suffix_is_stable_and_depends_on_the_pod_uid_and_the_pod_claim() -> None:
    assert generated_claim_name("p", "A", "gpu") == generated_claim_name("p", "A", "gpu")
    assert generated_claim_name("p", "A", "gpu") != generated_claim_name("p", "B", "gpu")
    assert hashed_suffix("A\0gpu") != hashed_suffix("A\0nic")
    # Every letter of the alphabet turns up over enough seeds: the whole alphabet is used.
    assert set("".join(hashed_suffix(str(i)) for i in range(200))) == set(NAME_ALPHABET)


@pytest.mark.parametrize(
    ("pod", "claim", "base"),
    [
        # 57 characters exactly: no cut.
        ("p" * 50, "abcde", "p" * 50 + "-abcde-"),
        # 58 characters: both cut in proportion (len * 57 // 58), joined by one "-", no trailing "-".
        ("p" * 50, "abcdef", "p" * 49 + "-abcde"),
        # A long pod name does not swallow the pod claim's name.
        ("p" * 200, "gpu-claim", "p" * (200 * 57 // 211) + "-" + "gpu-claim"[: 9 * 57 // 211]),
        ("a" * 40, "b" * 40, "a" * (40 * 57 // 82) + "-" + "b" * (40 * 57 // 82)),
    ],
)
def test_long_names_are_cut_in_proportion(pod: str, claim: str, base: str) -> None:
    name = generated_claim_name(pod, "U", claim)
    assert name == base + hashed_suffix(f"U\0{claim}")
    assert len(name) <= 63


TEMPLATE = ClaimTemplateDocument(
    meta=ObjectMeta(name="gpu-tmpl", namespace="ml", uid="T"),
    claim_labels={"app": "train"},
    claim_annotations={"note": "x", POD_CLAIM_NAME_ANNOTATION: "overridden"},
    spec=Spec(requests=(DeviceRequest("gpu", ExactDeviceRequest("gpu")),)),
)


def test_the_claim_made_from_a_template() -> None:
    pod = PodRef("ml", "p", "P")
    claim = claim_from_template(pod, "gpu", TEMPLATE)
    assert claim.meta.name == generated_claim_name("p", "P", "gpu")
    assert claim.meta.namespace == "ml"
    assert claim.meta.uid and claim.meta.uid == claim_from_template(pod, "gpu", TEMPLATE).meta.uid
    assert claim.meta.uid != claim_from_template(PodRef("ml", "p", "P2"), "gpu", TEMPLATE).meta.uid
    assert claim.meta.labels == {"app": "train"}
    assert claim.meta.annotations == {"note": "x", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert claim.meta.owner_references == (
        OwnerReference("v1", "Pod", "p", "P", controller=True, block_owner_deletion=True),
    )
    assert claim.spec is TEMPLATE.spec
    assert claim.allocation is None and claim.reserved_for is None
    assert claim.meta.source == ""


def test_a_missing_template_gives_the_kubelet_text_and_a_detail() -> None:
    pod = PodRef("ml", "p", "P")
    err = missing_template(pod, "gpu-tmpl")
    assert err.message == 'pod "ml/p": ResourceClaim not created yet'
    assert err.detail == "ResourceClaimTemplate ml/gpu-tmpl not found"
    assert template_for({"ml/gpu-tmpl": TEMPLATE}, pod, "gpu-tmpl") is TEMPLATE
    with pytest.raises(ClaimNotCreated) as caught:
        template_for({"ml/gpu-tmpl": TEMPLATE}, PodRef("default", "p", "P"), "gpu-tmpl")
    assert caught.value.detail == "ResourceClaimTemplate default/gpu-tmpl not found"
