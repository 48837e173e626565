"""The manifest folder's DRA documents: Namespace, ResourceClaim, ResourceClaimTemplate, DeviceClass and
DeviceTaintRule;
`read_document` reads those and a ResourceSlice alike (what a caller of the scheduler library holds).

Every supported version (`resource.k8s.io/v1`, `v1beta2`, `v1beta1`) is read into the v1 shapes of
`node.dra.model`. A document's default UID comes from the decoded document (node.identity), so a comment
or another document of the same file never makes a new object. CEL selectors are compiled through the
`SelectorCompiler` the daemon passes in; this module never imports a CEL library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubedevice.resource.capacity_reader import read_consumed_capacity
from kubedevice.resource.claim_spec import SpecReader
from kubedevice.resource.fields import DocumentError, Fields, check_text, shown
from kubedevice.resource.identity import document_uid
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ClaimTemplateDocument,
    ConsumerReference,
    DeviceAllocationConfiguration,
    DeviceClassDocument,
    DeviceRequestAllocationResult,
    DeviceTaintRuleDocument,
    NamespaceDocument,
    ObjectMeta,
    SelectorCompiler,
)
from kubedevice.resource.names import is_extended_resource_name, is_uuid
from kubedevice.resource.node_selector import NODE_NAME_FIELD, NodeSelector
from kubedevice.resource.node_selector_reader import read_node_selector
from kubedevice.resource.slice_document import parse_slice
from kubedevice.resource.slice_model import ResourceSliceDocument
from kubedevice.resource.taint_reader import read_taint_rule, read_time, read_tolerations

__all__ = [
    "DRA_GROUP",
    "DRA_KINDS",
    "DRA_VERSIONS",
    "DRADocument",
    "DocumentError",
    "check_kind",
    "parse_dra_document",
    "read_document",
]

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
#: Kinds of the `resource.k8s.io` group a manifest may hold, and the cluster-scoped ones among all kinds.
DRA_KINDS = ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "DeviceTaintRule")
CORE_KINDS = ("Pod", "Namespace")
SUPPORTED_KINDS = (*CORE_KINDS, *DRA_KINDS)
_CLUSTER_SCOPED = ("Namespace", "DeviceClass", "DeviceTaintRule")
#: Kinds served in other versions than DRA_VERSIONS (DeviceTaintRule: v1 since 1.37, before it v1beta2
#: and v1alpha3; never v1beta1).
_KIND_VERSIONS = {"DeviceTaintRule": ("v1", "v1beta2", "v1alpha3")}
#: What `read_document` reads: every kind the scheduler's inputs come in.
_READABLE_KINDS = ("Namespace", *DRA_KINDS, "ResourceSlice")

DRADocument = (
    NamespaceDocument | ClaimDocument | ClaimTemplateDocument | DeviceClassDocument | DeviceTaintRuleDocument
)


def check_kind(doc: object, kinds: tuple[str, ...] = SUPPORTED_KINDS) -> tuple[str, str]:
    """(kind, version) of a decoded document a manifest may hold; DocumentError with the user's text
    otherwise (a document that is not an object, too).

    `version` is the part after the group for `resource.k8s.io` kinds and `v1` for Pod and Namespace.
    """
    if not isinstance(doc, Mapping):
        raise DocumentError(f"not an object (a {type(doc).__name__}, not a mapping)", anonymous=True)
    check_text(doc)
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise DocumentError("no kind", anonymous=True)
    api_version = doc.get("apiVersion")
    shown = api_version if isinstance(api_version, str) else ""
    if kind not in kinds:
        raise DocumentError(
            f'unsupported kind "{kind}" (apiVersion "{shown}") — supported: {", ".join(kinds)}',
            anonymous=True,
        )
    if kind in CORE_KINDS:
        if api_version != "v1":
            raise DocumentError(
                f'kind {kind}: apiVersion "{shown}" is not supported (use v1)', anonymous=True
            )
        return kind, "v1"
    group, _, version = shown.partition("/")
    versions = _KIND_VERSIONS.get(kind, DRA_VERSIONS)
    if group != DRA_GROUP or version not in versions:
        listed = f"{DRA_GROUP}/{versions[0]}, {', '.join(versions[1:-1])} or {versions[-1]}"
        raise DocumentError(
            f'kind {kind}: apiVersion "{shown}" is not supported (use {listed})', anonymous=True
        )
    return kind, version


def parse_dra_document(
    doc: Mapping[str, Any], kind: str, version: str, source: str, compiler: SelectorCompiler | None
) -> DRADocument:
    """One checked document of kind Namespace, ResourceClaim, ResourceClaimTemplate, DeviceClass or
    DeviceTaintRule.

    `source` is the file's path relative to the manifest folder: it is part of the default UID.
    """
    meta = _metadata(doc, kind, source)
    where = f"{kind} {meta.key}: "
    f = Fields(where)
    reader = SpecReader(f, version, compiler)
    if kind == "Namespace":
        return NamespaceDocument(meta)
    spec = f.mapping(doc.get("spec"), "spec")
    if kind == "DeviceTaintRule":
        return read_taint_rule(f, meta, spec)
    if kind == "ResourceClaim":
        claim_spec = reader.claim_spec(spec, "spec")
        status = f.mapping(doc.get("status"), "status")
        allocation = _allocation(f, reader, status.get("allocation"), "status.allocation")
        reserved = status.get("reservedFor")
        return ClaimDocument(
            meta,
            claim_spec,
            allocation,
            None if reserved is None else _reserved_for(f, reserved, "status.reservedFor"),
        )
    if kind == "ResourceClaimTemplate":
        template_meta = f.mapping(spec.get("metadata"), "spec.metadata")
        return ClaimTemplateDocument(
            meta,
            claim_labels=f.string_map(template_meta.get("labels"), "spec.metadata.labels"),
            claim_annotations=f.string_map(template_meta.get("annotations"), "spec.metadata.annotations"),
            spec=reader.claim_spec(spec.get("spec"), "spec.spec"),
        )
    extended = f.string(spec.get("extendedResourceName"), "spec.extendedResourceName") or None
    if extended is not None and not is_extended_resource_name(extended):
        raise f.error("spec.extendedResourceName", f"{extended!r} is not a valid extended resource name")
    return DeviceClassDocument(
        meta,
        selectors=reader.selectors(spec.get("selectors"), "spec.selectors"),
        config=reader.configs(spec.get("config"), "spec.config", None),
        extended_resource_name=extended,
    )


def read_document(
    doc: Any, source: str = "", compiler: SelectorCompiler | None = None
) -> DRADocument | ResourceSliceDocument:
    """One decoded document (`document_file.load_documents` gives them) of kind Namespace, ResourceClaim,
    ResourceClaimTemplate, DeviceClass, DeviceTaintRule or ResourceSlice, in any supported version,
    checked; DocumentError with the user's text otherwise. `source` names where it was read (part of the
    default UID); `compiler` checks CEL selectors (None: not checked)."""
    kind, version = check_kind(doc, _READABLE_KINDS)
    if kind == "ResourceSlice":
        return parse_slice(doc, version, source)
    return parse_dra_document(doc, kind, version, source, compiler)


def _metadata(doc: Mapping[str, Any], kind: str, source: str) -> ObjectMeta:
    f = Fields(f"{kind}: ")
    metadata = f.mapping(doc.get("metadata"), "metadata")
    raw_name = metadata.get("name")
    if raw_name is None or raw_name == "":
        raise DocumentError(f"{kind}: missing metadata.name", anonymous=True)
    if not isinstance(raw_name, str):
        raise f.not_a_string(raw_name, "metadata.name")
    scoped = kind not in _CLUSTER_SCOPED
    namespace = ""
    if scoped:
        namespace = metadata.get("namespace", "default")
        f.where = f"{kind} {raw_name}: "
        f.dns_label(namespace, "metadata.namespace")
    f.where = f"{kind} {namespace}/{raw_name}: " if scoped else f"{kind} {raw_name}: "
    if kind == "Namespace":
        f.dns_label(raw_name, "metadata.name")
    else:
        f.dns_subdomain(raw_name, "metadata.name")
    uid = metadata.get("uid")
    if uid is None:
        uid = document_uid(doc, namespace, raw_name, source)
    elif not isinstance(uid, str) or not uid:
        raise f.error("metadata.uid", "must be a non-empty string")
    return ObjectMeta(
        name=raw_name,
        namespace=namespace,
        uid=uid,
        labels=f.string_map(metadata.get("labels"), "metadata.labels"),
        annotations=f.string_map(metadata.get("annotations"), "metadata.annotations"),
        owner_references=f.owner_references(metadata.get("ownerReferences"), "metadata.ownerReferences"),
        source=source,
    )


def _allocation(f: Fields, reader: SpecReader, value: Any, path: str) -> AllocationResult | None:
    """A user-written `status.allocation`: trusted as the kubelet trusts the API server, only its shape
    is checked (it may name devices no slice lists)."""
    if value is None:
        return None
    allocation = f.mapping(value, path)
    devices = f.mapping(allocation.get("devices"), f"{path}.devices")
    results: list[DeviceRequestAllocationResult] = []
    for i, raw in enumerate(f.items(devices.get("results"), f"{path}.devices.results")):
        at = f"{path}.devices.results[{i}]"
        r = f.mapping(raw, at)
        admin = r.get("adminAccess")
        share = r.get("shareID")
        results.append(
            DeviceRequestAllocationResult(
                request=f.string(r.get("request"), f"{at}.request", required=True),
                driver=f.dns_subdomain(r.get("driver"), f"{at}.driver"),
                pool=f.string(r.get("pool"), f"{at}.pool", required=True),
                device=f.string(r.get("device"), f"{at}.device", required=True),
                admin_access=None if admin is None else f.boolean(admin, f"{at}.adminAccess"),
                share_id=None if share is None else _share_id(f, share, f"{at}.shareID"),
                consumed_capacity=read_consumed_capacity(
                    f, r.get("consumedCapacity"), f"{at}.consumedCapacity"
                ),
                tolerations=read_tolerations(f, r.get("tolerations"), f"{at}.tolerations"),
                binding_conditions=_strings(f, r.get("bindingConditions"), f"{at}.bindingConditions"),
                binding_failure_conditions=_strings(
                    f, r.get("bindingFailureConditions"), f"{at}.bindingFailureConditions"
                ),
            )
        )
    config: list[DeviceAllocationConfiguration] = []
    for i, raw in enumerate(f.items(devices.get("config"), f"{path}.devices.config")):
        at = f"{path}.devices.config[{i}]"
        c = f.mapping(raw, at)
        source = f.string(c.get("source"), f"{at}.source", required=True)
        if source not in ("FromClass", "FromClaim"):
            raise f.error(f"{at}.source", f"{source!r} is not FromClass or FromClaim")
        requests = tuple(
            f.string(x, f"{at}.requests[{j}]", required=True)
            for j, x in enumerate(f.items(c.get("requests"), f"{at}.requests"))
        )
        config.append(
            DeviceAllocationConfiguration(
                "FromClass" if source == "FromClass" else "FromClaim",
                requests,
                reader.opaque(c.get("opaque"), f"{at}.opaque"),
            )
        )
    stamp = read_time(f, allocation.get("allocationTimestamp"), f"{path}.allocationTimestamp")
    selector = allocation.get("nodeSelector")
    if selector is None:
        return AllocationResult(tuple(results), tuple(config), allocation_timestamp=stamp)
    node_selector = read_node_selector(f, selector, f"{path}.nodeSelector", one_term=False)
    node_name = _node_name(node_selector)
    return AllocationResult(
        tuple(results), tuple(config), node_name, None if node_name else node_selector, stamp
    )


def _share_id(f: Fields, value: Any, path: str) -> str:
    """A share of a device is named by a UUID, as the API validates it (the CDI device of the share is
    named after it)."""
    text = f.string(value, path)
    if not is_uuid(text):
        raise f.error(path, f"must be a lowercase UUID (8-4-4-4-12 hex digits), not {shown(text)}")
    return text


def _node_name(selector: NodeSelector) -> str:
    """The node an allocation's `nodeSelector` names alone (`metadata.name In [<node>]`), as the scheduler
    writes it for a device of one node; "" for any other selector."""
    if len(selector.terms) != 1:
        return ""
    [term] = selector.terms
    if term.match_expressions or len(term.match_fields) != 1:
        return ""
    [field] = term.match_fields
    if field.key == NODE_NAME_FIELD and field.operator == "In" and len(field.values) == 1:
        return field.values[0]
    return ""


def _strings(f: Fields, value: Any, path: str) -> tuple[str, ...]:
    return tuple(f.string(v, f"{path}[{i}]", required=True) for i, v in enumerate(f.items(value, path)))


def _reserved_for(f: Fields, value: Any, path: str) -> tuple[ConsumerReference, ...]:
    out: list[ConsumerReference] = []
    for i, raw in enumerate(f.items(value, path, at_most=256)):
        at = f"{path}[{i}]"
        r = f.mapping(raw, at)
        out.append(
            ConsumerReference(
                resource=f.string(r.get("resource"), f"{at}.resource", required=True),
                name=f.string(r.get("name"), f"{at}.name", required=True),
                uid=f.string(r.get("uid"), f"{at}.uid", required=True),
                api_group=f.string(r.get("apiGroup"), f"{at}.apiGroup"),
            )
        )
    return tuple(out)


def read_allocation(value: Any, where: str) -> AllocationResult | None:
    """A v1 `status.allocation` JSON value (as `AllocationResult.to_json` writes it); errors start with
    `where`."""
    f = Fields(where)
    return _allocation(f, SpecReader(f, "v1", None), value, "allocation")


def read_reserved_for(value: Any, where: str) -> tuple[ConsumerReference, ...]:
    """A `status.reservedFor` JSON list; errors start with `where`."""
    return _reserved_for(Fields(where), value, "reservedFor")
