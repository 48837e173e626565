"""Pods from a manifest folder, like the kubelet's static pods: each file holds one or more v1 Pods.

Parsing is strict about what the device manager depends on (names, integer device counts, requests equal
to limits) and ignores the rest of the Pod. A file that cannot be used is reported with its reason and
never affects the pods of other files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubedevice.manager.registration import is_extended_resource_name
from kubedevice.manager.types import Container, Pod
from kubedevice.node.identity import document_digest, document_uid
from kubedevice.node.quantity import parse_device_count

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: Annotation that marks a pod as finished ("Succeeded"); such a pod is never admitted.
PHASE_ANNOTATION = "kubedevice.io/phase"
SUCCEEDED = "Succeeded"


class ManifestError(ValueError):
    """Why a manifest file cannot be used; str() is one line naming the problem."""


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

    @property
    def uid(self) -> str:
        return self.pod.uid


def parse_manifest(file_name: str, content: bytes, source_path: str | None = None) -> list[PodManifest]:
    """Every Pod of one file. Raises ManifestError naming the document and field at fault.

    A pod without `metadata.uid` gets one from its decoded document, namespace, name and `source_path`
    (the file's full path; `file_name` when not given), as the kubelet derives a static pod's.
    """
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(f"not UTF-8 text: {err}") from None
    if file_name.endswith(".json"):
        try:
            docs: list[Any] = [json.loads(text)] if text.strip() else []
        except json.JSONDecodeError as err:
            raise ManifestError(f"JSON error: {' '.join(str(err).split())}") from None
    else:
        docs = _load_yaml(text)
    flat: list[Any] = []
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            flat.extend(doc["items"])
        else:
            flat.append(doc)
    if not flat:
        raise ManifestError("no Pod in the file")
    source = file_name if source_path is None else source_path
    pods = [_parse_pod(doc, index, len(flat) > 1, file_name, source) for index, doc in enumerate(flat)]
    seen: set[tuple[str, str]] = set()
    for m in pods:
        key = (m.pod.namespace, m.pod.name)
        if key in seen:
            raise ManifestError(f"pod {m.pod.namespace}/{m.pod.name} appears twice")
        seen.add(key)
    return pods


def _load_yaml(text: str) -> list[Any]:
    """The file's non-empty YAML documents, read by libyaml when PyYAML has it (several times faster),
    plain documents built in one walk (kubedevice.node.plain_yaml).

    libyaml words its errors differently, so a file it rejects is read again by the pure loader: the
    documents or the error reported are always the pure loader's.
    """
    # Here: the daemon serves before any YAML is read.
    import yaml

    from kubedevice.node.plain_yaml import PLAIN_LOADER as fast

    if fast is not None:
        try:
            return [d for d in yaml.load_all(text, Loader=fast) if d is not None]
        except yaml.YAMLError:
            pass
    try:
        return [d for d in yaml.load_all(text, Loader=yaml.SafeLoader) if d is not None]
    except yaml.YAMLError as err:
        raise ManifestError(f"YAML error: {' '.join(str(err).split())}") from None


def _parse_pod(doc: Any, index: int, many: bool, file_name: str, source: str) -> PodManifest:
    where = f"document {index + 1}: " if many else ""
    if not isinstance(doc, Mapping):
        raise ManifestError(f"{where}not a Pod (a {type(doc).__name__}, not a mapping)")
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if kind != "Pod" or api_version != "v1":
        raise ManifestError(f"{where}not a v1 Pod (kind {kind!r}, apiVersion {api_version!r})")
    metadata = _mapping(doc.get("metadata"), f"{where}metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where}missing metadata.name")
    namespace = metadata.get("namespace", "default")
    if not isinstance(namespace, str) or not namespace:
        raise ManifestError(f"{where}metadata.namespace must be a non-empty string")
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
    return PodManifest(file=file_name, pod=pod, digest=document_digest(doc), succeeded=succeeded)


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
        if not isinstance(name, str) or not name:
            raise ManifestError(f"{what}[{i}] has no name")
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
    out: dict[str, int] = {}
    for resource in sorted({*limits, *requests}):
        if not isinstance(resource, str) or not _is_extended(resource, where):
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
    if "/" not in resource or "kubernetes.io/" in resource:
        return False  # cpu, memory, hugepages-*, and other native resources: not the device manager's
    if not is_extended_resource_name(resource):
        raise ManifestError(f"{where}: {resource!r} is not a valid extended resource name")
    return True
