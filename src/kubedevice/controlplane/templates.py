"""ResourceClaimTemplates: the claim the daemon generates for a pod, as the resource claim controller does.

One claim per (pod, pod claim), made when the pod first needs it: named from the pod and the pod claim
(the controller's proportional cut, then 5 characters as the API server's `generateName` adds, here taken
from a hash so the name is the same after a restart), in the pod's namespace, with the template's
`spec.spec`, labels and annotations, the `resource.kubernetes.io/pod-claim-name` annotation and a controller
ownerReference to the pod, so the kubelet's owner check applies unchanged. The pod's
`status.resourceClaimStatuses` then names it. The claim is deleted after its pod is gone.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kubedevice.dra.types import OwnerReference
from kubedevice.resource.model import ClaimDocument, ClaimTemplateDocument, ObjectMeta, ResourceClaimSpec

__all__ = [
    "NAME_ALPHABET",
    "POD_CLAIM_NAME_ANNOTATION",
    "ClaimNotCreated",
    "PodRef",
    "bare_generated_claim",
    "claim_from_template",
    "generated_claim_name",
    "generated_uid",
    "hashed_suffix",
    "missing_template",
    "pod_owner_reference",
    "template_for",
    "truncate_generate_name",
]

#: The annotation the claim controller puts on a generated claim: which pod claim it is for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
#: The API server's alphabet for `generateName` suffixes (no vowels, no confusable digits).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: The claim controller cuts `<pod>-<podClaim>-` to this length, leaving room for `-` and 5 characters.
_CONTROLLER_MAX_BASE = 57
#: The API server cuts any `generateName` to this length before adding 5 characters (63 in all).
_API_MAX_BASE = 58
_SUFFIX_LENGTH = 5


@dataclass(frozen=True, slots=True)
class PodRef:
    """The pod a claim is generated for."""

    namespace: str
    name: str
    uid: str


class ClaimNotCreated(Exception):
    """A template claim the daemon could not generate: the pod waits with the kubelet's text (`message`,
    from `resolve`) and `detail` says why."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


def hashed_suffix(seed: str) -> str:
    """5 characters of NAME_ALPHABET from SHA-256 of `seed`: what `generateName` adds, made stable."""
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    chars = []
    for _ in range(_SUFFIX_LENGTH):
        number, index = divmod(number, len(NAME_ALPHABET))
        chars.append(NAME_ALPHABET[index])
    return "".join(chars)


def truncate_generate_name(base: str) -> str:
    """The API server's cut of a `generateName` (58 characters; the 5 added make 63)."""
    return base[:_API_MAX_BASE]


def generated_claim_name(pod_name: str, pod_uid: str, pod_claim: str) -> str:
    """The claim controller's `generateName` for a template claim, then a stable 5-character suffix.

    `<pod>-<podClaim>-`; longer than 57 characters, both parts are cut in proportion to their length
    (upstream's rule, so a long pod name does not swallow the pod claim's name) and joined by one `-`.
    """
    base = f"{pod_name}-{pod_claim}-"
    if len(base) > _CONTROLLER_MAX_BASE:
        total = len(base)
        base = (
            pod_name[: len(pod_name) * _CONTROLLER_MAX_BASE // total]
            + "-"
            + pod_claim[: len(pod_claim) * _CONTROLLER_MAX_BASE // total]
        )
    return truncate_generate_name(base) + hashed_suffix(f"{pod_uid}\0{pod_claim}")


def generated_uid(namespace: str, name: str, pod_uid: str) -> str:
    """The UID of a claim the daemon generates: stable for the pod and name (a restart keeps it)."""
    digest = hashlib.sha256(f"generated\0{namespace}\0{name}\0{pod_uid}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


def pod_owner_reference(pod: PodRef) -> OwnerReference:
    """The controller reference the claim controller (and the scheduler, for the special claim) writes."""
    return OwnerReference("v1", "Pod", pod.name, pod.uid, controller=True, block_owner_deletion=True)


def claim_from_template(pod: PodRef, pod_claim: str, template: ClaimTemplateDocument) -> ClaimDocument:
    """The claim generated for `pod_claim` of `pod` from `template` (no status: the daemon decides it)."""
    name = generated_claim_name(pod.name, pod.uid, pod_claim)
    annotations = {**template.claim_annotations, POD_CLAIM_NAME_ANNOTATION: pod_claim}
    meta = ObjectMeta(
        name=name,
        namespace=pod.namespace,
        uid=generated_uid(pod.namespace, name, pod.uid),
        labels=dict(template.claim_labels),
        annotations=annotations,
        owner_references=(pod_owner_reference(pod),),
    )
    return ClaimDocument(meta=meta, spec=template.spec)


def bare_generated_claim(pod: PodRef, name: str, uid: str) -> ClaimDocument:
    """A generated claim whose template is gone since (after a restart): its identity and owner, no spec;
    its allocation, in the claim state, is what the kubelet reads."""
    meta = ObjectMeta(
        name=name, namespace=pod.namespace, uid=uid, owner_references=(pod_owner_reference(pod),)
    )
    return ClaimDocument(meta=meta, spec=ResourceClaimSpec())


def missing_template(pod: PodRef, template_name: str) -> ClaimNotCreated:
    """The kubelet's text for a template claim not generated, and the detail that names the template."""
    return ClaimNotCreated(
        f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet',
        f"ResourceClaimTemplate {pod.namespace}/{template_name} not found",
    )


def template_for(
    templates: Mapping[str, ClaimTemplateDocument], pod: PodRef, template_name: str
) -> ClaimTemplateDocument:
    """The pod's template (in the pod's namespace); raises ClaimNotCreated when there is none."""
    found = templates.get(f"{pod.namespace}/{template_name}")
    if found is None:
        raise missing_template(pod, template_name)
    return found
