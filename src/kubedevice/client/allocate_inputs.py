"""What `kubedevice allocate` reads: files and folders of documents, or the daemon's folders, and the
pod whose claims to allocate; turned into the AllocationRequest the daemon would make (docs/allocate.md).

Every document is read as the daemon reads it (`read_document`, selectors compiled); a document that
cannot be read is an InputError naming its file, never skipped: the command checks inputs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedevice.controlplane.claim_store import ClaimStore, ClaimStoreError, ClaimStoreFile, effective_claim
from kubedevice.controlplane.templates import ClaimNotCreated, PodRef, claim_from_template, template_for
from kubedevice.node.manifests import PodManifest, parse_pod
from kubedevice.resource.document_file import (
    MANIFEST_SUFFIXES,
    ManifestError,
    load_documents,
    read_document_file,
)
from kubedevice.resource.documents import DRADocument, read_document
from kubedevice.resource.fields import DocumentError
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ClaimTemplateDocument,
    DeviceClassDocument,
    DeviceTaintRuleDocument,
    NamespaceDocument,
)
from kubedevice.resource.slice_model import ResourceSliceDocument
from kubedevice.scheduler import (
    AllocatedState,
    AllocationRequest,
    CelSelectors,
    ClaimToAllocate,
    SliceScan,
    gather_pools,
)

__all__ = ["InputError", "Inputs", "Plan", "plan", "read_inputs"]


class InputError(Exception):
    """An input that cannot be used: one line, what is wrong and what to do."""


@dataclass(slots=True)
class Inputs:
    """Every document read, by kind, in the order read."""

    claims: list[ClaimDocument] = field(default_factory=list)
    templates: dict[str, ClaimTemplateDocument] = field(default_factory=dict)
    classes: dict[str, DeviceClassDocument] = field(default_factory=dict)
    namespaces: dict[str, NamespaceDocument] = field(default_factory=dict)
    slices: list[ResourceSliceDocument] = field(default_factory=list)
    taint_rules: list[DeviceTaintRuleDocument] = field(default_factory=list)
    #: The allocations and generated claims the daemon decided (`dra_claims.json`), when read.
    decided: ClaimStore = field(default_factory=ClaimStore)
    #: The pod given with `--pod`.
    pod: PodManifest | None = None

    def add(self, document: DRADocument | ResourceSliceDocument) -> None:
        if isinstance(document, ClaimDocument):
            self.claims.append(document)
        elif isinstance(document, ClaimTemplateDocument):
            self.templates[document.meta.key] = document
        elif isinstance(document, DeviceClassDocument):
            self.classes[document.meta.name] = document
        elif isinstance(document, NamespaceDocument):
            self.namespaces[document.meta.name] = document
        elif isinstance(document, ResourceSliceDocument):
            self.slices.append(document)
        elif isinstance(document, DeviceTaintRuleDocument):
            self.taint_rules.append(document)


def read_inputs(
    paths: Iterable[Path],
    selectors: CelSelectors,
    *,
    claim_store: Path | None = None,
    pod: Path | None = None,
) -> Inputs:
    """The documents of `paths` (files, or folders' `.yaml`, `.yml` and `.json` files in name order, not
    their subfolders; Pods skipped), the daemon's decisions in `claim_store` (a root folder) and the pod
    file. Raises InputError."""
    inputs = Inputs()
    for path in paths:
        for file in _files(path):
            # A folder's file is named by its name there, as the daemon names a manifest (the name is
            # part of a document's default UID, which must match the daemon's decisions).
            source = file.name if file != path else str(file)
            for document in _documents(file, selectors, source):
                inputs.add(document)
    if claim_store is not None:
        try:
            inputs.decided = ClaimStoreFile(claim_store).load()
        except ClaimStoreError as err:
            raise InputError(str(err)) from None
    if pod is not None:
        inputs.pod = _pod(pod, selectors, inputs)
    return inputs


def _files(path: Path) -> list[Path]:
    if not path.exists():
        raise InputError(f"{path}: no such file or folder — give files or folders of documents")
    if path.is_dir():
        try:
            names = sorted(
                n for n in os.listdir(path) if not n.startswith(".") and n.endswith(MANIFEST_SUFFIXES)
            )
        except OSError as err:
            raise InputError(
                f"{path}: cannot list: {err.strerror or err} — give a folder you can read"
            ) from None
        return [path / n for n in names if not (path / n).is_dir()]
    return [path]


def _content(file: Path) -> bytes:
    try:
        return read_document_file(file)
    except ManifestError as err:
        raise InputError(f"{file}: {err} — give a file of YAML or JSON documents") from None
    except OSError as err:
        raise InputError(f"{file}: cannot read: {err.strerror or err} — give a file you can read") from None


def _documents(file: Path, selectors: CelSelectors, source: str, pods: list[Any] | None = None) -> list[Any]:
    """The file's documents, read (`source` names where, in their default UIDs); its Pods are skipped,
    or put in `pods` (decoded) when given."""
    content = _content(file)
    try:
        docs = load_documents(file.name, content)
    except ManifestError as err:
        raise InputError(f"{file}: {err} — fix the file") from None
    out: list[DRADocument | ResourceSliceDocument] = []
    for index, doc in enumerate(docs):
        if isinstance(doc, Mapping) and doc.get("kind") == "Pod":
            # A manifest folder's pods are the daemon's: `--pod FILE` names the one to allocate for.
            if pods is not None:
                pods.append(doc)
            continue
        where = f"document {index + 1}: " if len(docs) > 1 else ""
        try:
            out.append(read_document(doc, source, selectors))
        except DocumentError as err:
            raise InputError(
                f"{file}: {where if err.anonymous else ''}{err} — fix the document (the API server "
                "would refuse it too)"
            ) from None
    return out


def _pod(file: Path, selectors: CelSelectors, inputs: Inputs) -> PodManifest:
    """The one Pod of `file`; the file's other documents join the inputs."""
    pods: list[Any] = []
    for document in _documents(file, selectors, str(file), pods):
        inputs.add(document)
    if len(pods) != 1:
        raise InputError(f"--pod {file}: has {len(pods)} Pods — give a file with one Pod")
    try:
        return parse_pod(pods[0], file.name, str(file))
    except ManifestError as err:
        raise InputError(f"--pod {file}: {err} — fix the pod") from None


# --- the request ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """The claims of one search and what they are: `to_allocate` go into the search, `allocated` have
    an allocation already (shown as they are); `template` names the template a claim was made from."""

    request: AllocationRequest
    scan: SliceScan
    claims: tuple[tuple[ClaimDocument, str], ...]
    to_allocate: frozenset[str]


def plan(inputs: Inputs, node_name: str, node_labels: Mapping[str, str]) -> Plan:
    """The request the daemon would make: the pod's claims (`--pod`), else every claim without an
    allocation; the devices of every allocated claim in use. Raises InputError when there is nothing to
    allocate or the pod names a claim or template the inputs lack."""
    claims = [(_decided(inputs, c), "") for c in inputs.claims]
    if inputs.pod is not None:
        claims = _pod_claims(inputs, inputs.pod)
    # What allocated claims hold (whole devices, and the capacity shares consume), each allocation once.
    allocated = AllocatedState.gather(_allocations(inputs, [c for c, _ in claims]))
    wanted = [c for c, _ in claims if c.allocation is None]
    if not wanted:
        what = f"pod {inputs.pod.pod.namespace}/{inputs.pod.pod.name}" if inputs.pod else "the inputs"
        raise InputError(
            f"no ResourceClaim without an allocation in {what} — give a claim to allocate, "
            "or a pod with --pod FILE"
        )
    scan = gather_pools(inputs.slices, node_name, node_labels)
    request = AllocationRequest(
        claims=tuple(ClaimToAllocate(c.meta.namespace, c.meta.name, c.spec) for c in wanted),
        classes=inputs.classes,
        pools=scan.pools,
        in_use=allocated.in_use,
        namespaces=inputs.namespaces,
        node_name=node_name,
        node_labels=dict(node_labels),
        consumed_capacity=allocated.consumed_capacity,
        taint_rules=tuple(inputs.taint_rules),
    )
    return Plan(request, scan, tuple(claims), frozenset(c.meta.key for c in wanted))


def _allocations(inputs: Inputs, claims: list[ClaimDocument]) -> list[AllocationResult]:
    """Every allocation held, once per claim: the inputs' claims (with the daemon's decisions), the
    given ones (a pod's), and the others the daemon decided (claims it generated)."""
    by_key = {c.meta.key: _decided(inputs, c) for c in inputs.claims}
    by_key.update((c.meta.key, c) for c in claims)
    held = [c.allocation for c in by_key.values() if c.allocation is not None]
    for key, record in inputs.decided.records.items():
        if record.allocation is not None and key not in by_key:
            held.append(record.allocation)
    return held


def _decided(inputs: Inputs, claim: ClaimDocument) -> ClaimDocument:
    """The claim with the daemon's allocation, when it made one."""
    return effective_claim(claim, inputs.decided.get(claim.meta.key)) or claim


def _pod_claims(inputs: Inputs, pod: PodManifest) -> list[tuple[ClaimDocument, str]]:
    ref = PodRef(pod.pod.namespace, pod.pod.name, pod.pod.uid)
    where = f"pod {ref.namespace}/{ref.name}"
    by_key = {c.meta.key: c for c in inputs.claims}
    out: list[tuple[ClaimDocument, str]] = []
    for pod_claim in pod.claims.resource_claims:
        if pod_claim.resource_claim_name is not None:
            key = f"{ref.namespace}/{pod_claim.resource_claim_name}"
            found = by_key.get(key)
            if found is None:
                raise InputError(
                    f"{where}: ResourceClaim {key} is not in the inputs — give the file that holds it"
                )
            out.append((_decided(inputs, found), ""))
            continue
        template = pod_claim.resource_claim_template_name or ""
        try:
            made = claim_from_template(ref, pod_claim.name, template_for(inputs.templates, ref, template))
        except ClaimNotCreated as err:
            raise InputError(f"{where}: {err.detail} in the inputs — give the file that holds it") from None
        # Made by the daemon already (its pod is running or waits): with its allocation, if any.
        decided = effective_claim(None, inputs.decided.get(made.meta.key))
        out.append((decided or made, template))
    return out
