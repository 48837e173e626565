"""The internal (resource.k8s.io/v1) shapes every part of the daemon's DRA speaks (those of ResourceSlices:
slice_model.py).

Documents of every supported version are converted into these on reading, so the allocator, the claim
store and the pod flow never see an API version. All are frozen: a scan's result is shared, never edited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from kubedevice.resource.capacity import CapacityRequirements, ConsumedCapacity
from kubedevice.resource.device_status import AllocatedDeviceStatus
from kubedevice.resource.node_selector import NodeSelector
from kubedevice.resource.taints import DeviceTaint, DeviceTaintSelector, DeviceToleration

__all__ = [
    "IMPLICIT_EXTENDED_RESOURCE_PREFIX",
    "AllocationMode",
    "AllocationResult",
    "ClaimDocument",
    "ClaimTemplateDocument",
    "ConsumerReference",
    "DRADocuments",
    "DeviceAllocationConfiguration",
    "DeviceClaimConfiguration",
    "DeviceClassDocument",
    "DeviceConstraint",
    "DeviceID",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSubRequest",
    "DeviceTaintRuleDocument",
    "ExactDeviceRequest",
    "NamespaceDocument",
    "ObjectMeta",
    "OpaqueConfig",
    "OwnerReference",
    "ResourceClaimSpec",
    "SelectorCompileError",
    "SelectorCompiler",
]

AllocationMode = Literal["ExactCount", "All"]
ConfigSource = Literal["FromClass", "FromClaim"]
#: Every class is reachable as an extended resource under this prefix, followed by the class name.
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
#: A device as allocation results name it: (driver, pool, device).
DeviceID = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """`metadata`, plus where the document was read (`source`, relative to the manifest folder)."""

    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    #: The manifest file path relative to the folder; "" for an object the daemon made itself.
    source: str = ""

    @property
    def key(self) -> str:
        """`ns/name` for a namespaced object, `name` for a cluster-scoped one."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


# --- claims ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExactDeviceRequest:
    device_class_name: str
    #: CEL expressions, all of which a device must satisfy.
    selectors: tuple[str, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    #: Devices wanted with ExactCount (at least 1); 0 with All, as the API leaves it.
    count: int = 1
    admin_access: bool = False
    #: Taints the devices may have and still be allocated (copied into each result).
    tolerations: tuple[DeviceToleration, ...] = ()
    #: `capacity.requests`: what each allocated device must provide (consumable capacity).
    capacity: CapacityRequirements | None = None


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request: either `exactly` one kind of device, or the first of `first_available` that fits."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()

    def subrequest(self, name: str) -> DeviceSubRequest | None:
        return next((s for s in self.first_available if s.name == name), None)


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    #: The requests the constraint binds; empty means every request of the claim.
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    driver: str
    #: The decoded JSON/YAML value, passed to the driver as written.
    parameters: Any = None


@dataclass(frozen=True, slots=True)
class DeviceClaimConfiguration:
    #: The requests the configuration applies to; empty means all of them.
    requests: tuple[str, ...] = ()
    opaque: OpaqueConfig | None = None


@dataclass(frozen=True, slots=True)
class ResourceClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()

    def request(self, name: str) -> DeviceRequest | None:
        """The request of that name; `name` may be `<request>/<subrequest>` as allocation results say."""
        head = name.split("/", 1)[0]
        return next((r for r in self.requests if r.name == head), None)

    @property
    def request_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.requests)


@dataclass(frozen=True, slots=True)
class DeviceRequestAllocationResult:
    """One `status.allocation.devices.results[]` entry: the device a request got."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    #: A share of a device with allowMultipleAllocations: its ID, and what it consumes of each capacity.
    share_id: str | None = None
    consumed_capacity: ConsumedCapacity | None = None
    #: The request's tolerations when the device was allocated (upstream copies them).
    tolerations: tuple[DeviceToleration, ...] = ()
    #: The device's binding conditions when it was allocated (upstream copies them).
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    """One `status.reservedFor[]` entry; the kubelet compares only the UID."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False
    #: Set on the references the claim controller writes: the owner is not deleted before the claim.
    block_owner_deletion: bool = False


@dataclass(frozen=True, slots=True)
class DeviceAllocationConfiguration:
    source: ConfigSource
    requests: tuple[str, ...] = ()
    opaque: OpaqueConfig | None = None


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """A claim's `status.allocation`: written by the user, or made by the daemon's allocator; what the DRA
    manager reads of a claim's allocation too."""

    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[DeviceAllocationConfiguration, ...] = ()
    #: The node the allocation is bound to (`metadata.name In [<node>]`), or "" when it is not bound to one.
    node_name: str = ""
    #: When not bound to one node: the nodes the devices are available on (merged from the slices' and
    #: devices' selectors), or None when they are available everywhere.
    node_selector: NodeSelector | None = None
    #: `allocationTimestamp` (RFC 3339, UTC, to the second): when the scheduler (here the daemon) made the
    #: allocation; what the binding timeout counts from. None: unknown (a user-written allocation).
    allocation_timestamp: str | None = None

    @property
    def drivers(self) -> list[str]:
        """The claim's drivers, each once, in the order of their first result."""
        return list(dict.fromkeys(r.driver for r in self.results))

    def device_ids(self) -> tuple[DeviceID, ...]:
        return tuple((r.driver, r.pool, r.device) for r in self.results)

    def to_json(self) -> dict[str, Any]:
        """The v1 `status.allocation` as the API server would show it."""
        results: list[dict[str, Any]] = []
        for r in self.results:
            entry: dict[str, Any] = {
                "request": r.request,
                "driver": r.driver,
                "pool": r.pool,
                "device": r.device,
            }
            if r.admin_access is not None:
                entry["adminAccess"] = r.admin_access
            if r.tolerations:
                entry["tolerations"] = [t.to_json() for t in r.tolerations]
            if r.binding_conditions:
                entry["bindingConditions"] = list(r.binding_conditions)
            if r.binding_failure_conditions:
                entry["bindingFailureConditions"] = list(r.binding_failure_conditions)
            if r.share_id is not None:
                entry["shareID"] = r.share_id
            if r.consumed_capacity:
                entry["consumedCapacity"] = {k: str(q) for k, q in sorted(r.consumed_capacity.items())}
            results.append(entry)
        devices: dict[str, Any] = {"results": results}
        if self.config:
            devices["config"] = [_config_json(c) for c in self.config]
        out: dict[str, Any] = {"devices": devices}
        if self.node_name:
            out["nodeSelector"] = NodeSelector.for_node(self.node_name).to_json()
        elif self.node_selector is not None:
            out["nodeSelector"] = self.node_selector.to_json()
        if self.allocation_timestamp is not None:
            out["allocationTimestamp"] = self.allocation_timestamp
        return out


def _config_json(c: DeviceAllocationConfiguration) -> dict[str, Any]:
    out: dict[str, Any] = {"source": c.source}
    if c.requests:
        out["requests"] = list(c.requests)
    if c.opaque is not None:
        out["opaque"] = {"driver": c.opaque.driver, "parameters": c.opaque.parameters}
    return out


@dataclass(frozen=True, slots=True)
class ClaimDocument:
    KIND: ClassVar[str] = "ResourceClaim"

    meta: ObjectMeta
    spec: ResourceClaimSpec
    #: A user-written `status.allocation` (trusted as the kubelet trusts the API server), or None.
    allocation: AllocationResult | None = None
    #: `status.reservedFor` as written; None when the document has none (the daemon then reserves).
    reserved_for: tuple[ConsumerReference, ...] | None = None
    #: `status.devices`: what the drivers reported of the allocated devices (the daemon's claim store
    #: keeps it; a manifest's own is not read).
    device_status: tuple[AllocatedDeviceStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimTemplateDocument:
    KIND: ClassVar[str] = "ResourceClaimTemplate"

    meta: ObjectMeta
    #: `spec.metadata.labels` / `.annotations`: what the generated claim is given.
    claim_labels: Mapping[str, str] = field(default_factory=dict)
    claim_annotations: Mapping[str, str] = field(default_factory=dict)
    spec: ResourceClaimSpec = field(default_factory=ResourceClaimSpec)


@dataclass(frozen=True, slots=True)
class DeviceClassDocument:
    KIND: ClassVar[str] = "DeviceClass"

    meta: ObjectMeta
    selectors: tuple[str, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()
    extended_resource_name: str | None = None


@dataclass(frozen=True, slots=True)
class NamespaceDocument:
    KIND: ClassVar[str] = "Namespace"

    meta: ObjectMeta


@dataclass(frozen=True, slots=True)
class DeviceTaintRuleDocument:
    """A DeviceTaintRule: `taint` on every device `selector` matches (None: every device, as upstream's
    slice tracker applies a rule without one)."""

    KIND: ClassVar[str] = "DeviceTaintRule"

    meta: ObjectMeta
    taint: DeviceTaint
    selector: DeviceTaintSelector | None = None


# --- one scan -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DRADocuments:
    """The DRA documents one manifest scan found; keys are `ns/name` (namespaced) or `name`.

    The mappings are looked up by key; their iteration order means nothing (sort to show them)."""

    claims: Mapping[str, ClaimDocument] = field(default_factory=dict)
    templates: Mapping[str, ClaimTemplateDocument] = field(default_factory=dict)
    classes: Mapping[str, DeviceClassDocument] = field(default_factory=dict)
    namespaces: Mapping[str, NamespaceDocument] = field(default_factory=dict)
    taint_rules: Mapping[str, DeviceTaintRuleDocument] = field(default_factory=dict)
    #: Every file of the folder refused now (relative path -> the one-line reason), as `/pods` reports
    #: bad manifests: a claim defined only in such a file is missing.
    errors: Mapping[str, str] = field(default_factory=dict)

    def class_for(self, resource: str) -> DeviceClassDocument | None:
        """The class an extended resource name maps to: its `extendedResourceName`, or the implicit
        `deviceclass.resource.kubernetes.io/<class>`; None when no class does."""
        if resource.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX):
            return self.classes.get(resource[len(IMPLICIT_EXTENDED_RESOURCE_PREFIX) :])
        return next((c for c in self.classes.values() if c.extended_resource_name == resource), None)


# --- the CEL seam ---------------------------------------------------------------------------------


class SelectorCompileError(Exception):
    """A CEL selector that does not compile; the message is the compiler's own."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SelectorCompiler(Protocol):
    """Checks CEL selectors when documents are read; the daemon passes the real one in."""

    def compile(self, expression: str) -> None:
        """Returns when `expression` compiles; raises SelectorCompileError otherwise."""
        ...
