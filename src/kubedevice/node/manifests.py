"""Pods from a manifest folder, like the kubelet's static pods, and the documents DRA reads beside them.

A file holds one or more documents: v1 Pods, v1 Namespaces, and `resource.k8s.io` ResourceClaims,
ResourceClaimTemplates and DeviceClasses (node.dra.documents reads those). Parsing is strict about what
the device manager and DRA depend on (names, integer device counts, requests equal to limits, claims) and
ignores the rest of the Pod. One bad document refuses its whole file; a file that cannot be used is
reported with its reason and never affects the documents of other files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubedevice.dra import types as dra
from kubedevice.manager.types import Container, Pod
from kubedevice.resource.document_file import ManifestError, load_documents
from kubedevice.resource.documents import DRADocument, check_kind, parse_dra_document
from kubedevice.resource.fields import DocumentError, Fields
from kubedevice.resource.identity import document_digest, document_uid
from kubedevice.resource.model import (
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    DeviceClassDocument,
    SelectorCompiler,
)
from kubedevice.resource.names import is_dns_subdomain, is_extended_resource_name
from kubedevice.resource.pod_claims import PodClaims, read_pod_claims
from kubedevice.resource.quantity import parse_device_count

#: Annotation that marks a pod as finished ("Succeeded"); such a pod is never admitted.
PHASE_ANNOTATION = "kubedevice.io/phase"
SUCCEEDED = "Succeeded"


@dataclass(frozen=True, slots=True)
class PodManifest:
    """One Pod read from a manifest file."""

    file: str
    pod: Pod
    #: Hash of the decoded pod document: a different value means the pod's manifest changed (a comment,
    #: the layout or another document of the same file do not count).
    digest: str
    #: The manifest says the pod already finished; it is shown but never admitted.
    succeeded: bool = False
    #: `spec.resourceClaims` and the containers' `resources.claims`.
    claims: PodClaims = field(default_factory=PodClaims)

    @property
    def uid(self) -> str:
        return self.pod.uid

    def dra_pod(
        self,
        claim_statuses: Mapping[str, str | None] | None = None,
        extended_resource_claim: dra.ExtendedResourceClaimStatus | None = None,
    ) -> dra.DRAPod:
        """The pod as the DRA manager sees it, with the statuses the daemon decided for it."""
        pod = self.pod
        return dra.DRAPod.from_claims(
            pod.uid, pod.namespace, pod.name, self.claims, claim_statuses, extended_resource_claim
        )


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """What one file holds: its pods and its DRA documents, each in file order."""

    pods: list[PodManifest]
    dra: list[DRADocument]


def parse_manifest(file_name: str, content: bytes, source_path: str | None = None) -> list[PodManifest]:
    """Every Pod of one file (its other documents are checked, not returned); see parse_file."""
    return parse_file(file_name, content, source_path).pods


def parse_file(
    file_name: str,
    content: bytes,
    source_path: str | None = None,
    compiler: SelectorCompiler | None = None,
) -> ManifestFile:
    """Every document of one file. Raises ManifestError naming the document and field at fault.

    A document without `metadata.uid` gets one from its decoded document, namespace, name and
    `source_path` (the file's path relative to the manifest folder; `file_name` when not given), as the
    kubelet derives a static pod's. `compiler` checks CEL selectors (None: not checked).
    """
    flat = load_documents(file_name, content)
    if not flat:
        raise ManifestError("no document in the file")
    source = file_name if source_path is None else source_path
    many = len(flat) > 1
    pods: list[PodManifest] = []
    documents: list[DRADocument] = []
    for index, doc in enumerate(flat):
        where = f"document {index + 1}: " if many else ""
        try:
            kind, version = check_kind(doc)
            if kind == "Pod":
                pods.append(_parse_pod(doc, where, file_name, source))
            else:
                documents.append(parse_dra_document(doc, kind, version, source, compiler))
        except DocumentError as err:
            raise ManifestError(f"{where if err.anonymous else ''}{err}") from None
    _check_unique(pods, documents)
    return ManifestFile(pods, documents)


def parse_pod(doc: Any, file_name: str, source: str | None = None) -> PodManifest:
    """One decoded Pod document, checked as in a manifest file (`source`: where it was read, part of its
    default UID; `file_name` when not given). Raises ManifestError."""
    try:
        check_kind(doc, ("Pod",))
    except DocumentError as err:
        raise ManifestError(str(err)) from None
    return _parse_pod(doc, "", file_name, file_name if source is None else source)


def _check_unique(pods: list[PodManifest], documents: list[DRADocument]) -> None:
    seen: set[tuple[str, str]] = set()
    for m in pods:
        key = (m.pod.namespace, m.pod.name)
        if key in seen:
            raise ManifestError(f"pod {m.pod.namespace}/{m.pod.name} appears twice")
        seen.add(key)
    extended: dict[str, str] = {}
    for d in documents:
        kind = type(d).KIND
        if (kind, d.meta.key) in seen:
            raise ManifestError(f"{kind} {d.meta.key} appears twice")
        seen.add((kind, d.meta.key))
        if isinstance(d, DeviceClassDocument) and d.extended_resource_name is not None:
            other = extended.setdefault(d.extended_resource_name, d.meta.name)
            if other != d.meta.name:
                raise ManifestError(
                    f"DeviceClass {d.meta.name}: extendedResourceName {d.extended_resource_name} is already "
                    f"used by DeviceClass {other}"
                )


def _parse_pod(doc: Mapping[str, Any], where: str, file_name: str, source: str) -> PodManifest:
    metadata = _mapping(doc.get("metadata"), f"{where}metadata")
    name = metadata.get("name")
    if name is None or name == "":
        raise ManifestError(f"{where}missing metadata.name")
    # The API server's rules (ValidatePodName, ValidateNamespaceName), checked name first so that no
    # refused name is ever quoted whole in a message's prefix.
    unnamed = Fields(f"{where}pod: ")
    if not isinstance(name, str):
        raise unnamed.not_a_string(name, "metadata.name")
    unnamed.dns_subdomain(name, "metadata.name")
    namespace = metadata.get("namespace", "default")
    if not isinstance(namespace, str) or not namespace:
        raise ManifestError(f"{where}metadata.namespace must be a non-empty string")
    Fields(f"pod {name}: ").dns_label(namespace, "metadata.namespace")
    where = f"pod {namespace}/{name}: "
    uid = metadata.get("uid")
    if uid is None:
        uid = document_uid(doc, namespace, name, source)
    elif not isinstance(uid, str) or not uid:
        raise ManifestError(f"{where}metadata.uid must be a non-empty string")
    annotations = _mapping(metadata.get("annotations"), f"{where}metadata.annotations")
    spec = _mapping(doc.get("spec"), f"{where}spec")
    status = _mapping(doc.get("status"), f"{where}status")
    init = _containers(spec.get("initContainers"), f"{where}spec.initContainers", required=False)
    apps = _containers(spec.get("containers"), f"{where}spec.containers", required=True)
    names = [c.name for c in (*init, *apps)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ManifestError(f"{where}container name {duplicates[0]!r} is used twice")
    succeeded = status.get("phase") == SUCCEEDED or annotations.get(PHASE_ANNOTATION) == SUCCEEDED
    pod = Pod(uid=uid, namespace=namespace, name=name, init_containers=init, containers=apps)
    raw = [
        (f"spec.{field}[{i}]", c["name"], c)
        for field in ("initContainers", "containers")
        for i, c in enumerate(spec.get(field) or ())
    ]
    try:
        claims = read_pod_claims(Fields(where), spec, raw)
    except DocumentError as err:
        raise ManifestError(str(err)) from None
    return PodManifest(
        file=file_name, pod=pod, digest=document_digest(doc), succeeded=succeeded, claims=claims
    )


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(f"{what} must be a mapping")
    return value


def _containers(value: Any, what: str, *, required: bool) -> list[Container]:
    if value is None:
        value = []
    if not isinstance(value, list):
        raise ManifestError(f"{what} must be a list")
    if required and not value:
        raise ManifestError(f"{what} must list at least one container")
    out: list[Container] = []
    for i, raw in enumerate(value):
        if not isinstance(raw, Mapping):
            raise ManifestError(f"{what}[{i}] must be a mapping")
        name = raw.get("name")
        if name is None or name == "":
            raise ManifestError(f"{what}[{i}] has no name")
        Fields("").dns_label(name, f"{what}[{i}].name")  # ValidateContainers: a DNS-1123 label
        restart_policy = raw.get("restartPolicy")
        if restart_policy is not None and not isinstance(restart_policy, str):
            raise ManifestError(f"{what}[{i}] ({name}): restartPolicy must be a string")
        limits = _device_limits(raw.get("resources"), f"{what}[{i}] ({name})")
        out.append(Container(name=name, limits=limits, restart_policy=restart_policy))
    return out


def _device_limits(value: Any, where: str) -> dict[str, int]:
    """Extended resources of one container; requests must equal limits for them, as the API server demands."""
    resources = _mapping(value, f"{where}: resources")
    limits = _mapping(resources.get("limits"), f"{where}: resources.limits")
    requests = _mapping(resources.get("requests"), f"{where}: resources.requests")
    for list_name, keys in (("limits", limits), ("requests", requests)):
        for key in keys:
            if not isinstance(key, str):  # a ResourceList's keys are resource names: the API decodes strings
                raise ManifestError(f"{where}: resources.{list_name}: key {key!r} is not a string")
    out: dict[str, int] = {}
    for resource in sorted({*limits, *requests}):
        if not _is_extended(resource, where):
            continue
        if resource not in limits:
            raise ManifestError(
                f"{where}: {resource} has requests but no limits; extended resources need limits"
            )
        try:
            count = parse_device_count(limits[resource])
        except ValueError as err:
            raise ManifestError(f"{where}: limits of {resource}: {err}") from None
        if resource in requests:
            try:
                requested = parse_device_count(requests[resource])
            except ValueError as err:
                raise ManifestError(f"{where}: requests of {resource}: {err}") from None
            if requested != count:
                raise ManifestError(
                    f"{where}: requests ({requested}) and limits ({count}) of {resource} must be equal"
                )
        out[resource] = count
    return out


def _is_extended(resource: str, where: str) -> bool:
    if resource.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX):
        # Every DeviceClass as an extended resource (DRA-backed only), though its domain is Kubernetes'.
        if not is_dns_subdomain(resource[len(IMPLICIT_EXTENDED_RESOURCE_PREFIX) :]):
            raise ManifestError(
                f"{where}: {resource!r} is not a valid extended resource name "
                "(a DeviceClass name must follow the prefix)"
            )
        return True
    if "/" not in resource or "kubernetes.io/" in resource:
        return False  # cpu, memory, hugepages-*, and other native resources: not the device manager's
    if not is_extended_resource_name(resource):
        raise ManifestError(f"{where}: {resource!r} is not a valid extended resource name")
    return True
