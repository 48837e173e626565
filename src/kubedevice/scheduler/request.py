"""What one allocation is asked for (the claims, classes, pools and devices in use), and the refusal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from kubedevice.resource.capacity import ConsumedCapacity
from kubedevice.resource.documents import DRADocument
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ClaimTemplateDocument,
    DeviceClassDocument,
    DeviceID,
    DeviceTaintRuleDocument,
    NamespaceDocument,
    ResourceClaimSpec,
)
from kubedevice.resource.node_labels import HOSTNAME_LABEL
from kubedevice.resource.node_labels import node_labels as node_labels_of
from kubedevice.resource.slice_model import Pool, ResourceSliceDocument
from kubedevice.scheduler.allocated import AllocatedState
from kubedevice.scheduler.explanation import RequestExplanation
from kubedevice.scheduler.pools import gather_pools

__all__ = [
    "ADMIN_ACCESS_LABEL",
    "HOSTNAME_LABEL",
    "SCHEDULER_ERROR",
    "UNSCHEDULABLE",
    "AllocationRequest",
    "ClaimToAllocate",
    "Unschedulable",
]

#: The namespace label that allows `adminAccess` requests (the API server's check).
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


#: The scheduler's reason when no allocation or reservation is possible: the pod's status reason.
UNSCHEDULABLE = "Unschedulable"
#: The scheduler's reason when scheduling failed with an internal error (v1.PodReasonSchedulerError): the
#: pod stays Pending and is tried again.
SCHEDULER_ERROR = "SchedulerError"


class Unschedulable(Exception):
    """No allocation: the pod stays Pending with reason `Unschedulable` and this message; `explanation`
    says, per request, what ruled the devices out (empty when the refusal came before any search)."""

    reason = UNSCHEDULABLE

    def __init__(self, message: str, explanation: Sequence[RequestExplanation] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.explanation = tuple(explanation)


@dataclass(frozen=True, slots=True)
class ClaimToAllocate:
    """One claim the search must allocate: where it lives and its spec."""

    namespace: str
    name: str
    spec: ResourceClaimSpec

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class AllocationRequest:
    """Everything one search needs; `claims` in pod-claim order (the extended-resource claim last)."""

    claims: tuple[ClaimToAllocate, ...]
    classes: Mapping[str, DeviceClassDocument]
    pools: Sequence[Pool]
    #: Devices held whole by allocated claims (results without a shareID; those with adminAccess excluded).
    in_use: Set[DeviceID]
    namespaces: Mapping[str, NamespaceDocument]
    node_name: str
    #: The node's labels (`kubernetes.io/hostname` among them), matched by node selectors.
    node_labels: Mapping[str, str] = field(default_factory=dict)
    #: Devices (with allowMultipleAllocations) shared by allocated claims: what their shares consume of
    #: each capacity, summed (`AllocatedState.gather` fills this and `in_use` from allocations).
    consumed_capacity: Mapping[DeviceID, ConsumedCapacity] = field(default_factory=dict)
    #: DeviceTaintRules: each adds its taint to the devices it selects.
    taint_rules: Sequence[DeviceTaintRuleDocument] = ()

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[DRADocument | ResourceSliceDocument],
        node_name: str,
        in_use: Iterable[DeviceID] = (),
        node_labels: Mapping[str, str] | None = None,
    ) -> AllocationRequest:
        """The request a scheduler would make for node `node_name` from these documents (as
        `kubedevice.resource.documents.read_document` reads them).

        Every ResourceClaim without `status.allocation` is allocated, together, in the order given (as
        one pod's claims); the devices of those with one are in use (results with adminAccess excepted),
        besides `in_use`; a result with a shareID consumes its `consumedCapacity` of the device instead.
        DeviceTaintRules taint the devices they select. The ResourceSlices are gathered into pools as
        `gather_pools` does (its SliceScan says which slices were ignored and why). A ResourceClaimTemplate
        is refused with
        ValueError: the scheduler sees the claim made from it, never the template.
        """
        claims: list[ClaimToAllocate] = []
        classes: dict[str, DeviceClassDocument] = {}
        namespaces: dict[str, NamespaceDocument] = {}
        rules: list[DeviceTaintRuleDocument] = []
        slices: list[ResourceSliceDocument] = []
        allocations: list[AllocationResult] = []
        for document in documents:
            if isinstance(document, ClaimDocument):
                if document.allocation is None:
                    claims.append(ClaimToAllocate(document.meta.namespace, document.meta.name, document.spec))
                else:
                    allocations.append(document.allocation)
            elif isinstance(document, DeviceClassDocument):
                classes[document.meta.name] = document
            elif isinstance(document, NamespaceDocument):
                namespaces[document.meta.name] = document
            elif isinstance(document, DeviceTaintRuleDocument):
                rules.append(document)
            elif isinstance(document, ResourceSliceDocument):
                slices.append(document)
            elif isinstance(document, ClaimTemplateDocument):
                raise ValueError(
                    f"ResourceClaimTemplate {document.meta.key}: the scheduler allocates the claims made "
                    "from templates, not templates"
                )
            else:
                raise TypeError(f"not a document the scheduler reads: {type(document).__name__}")
        labels = dict(node_labels) if node_labels is not None else node_labels_of(node_name)
        allocated = AllocatedState.gather(allocations, in_use)
        return cls(
            claims=tuple(claims),
            classes=classes,
            pools=gather_pools(slices, node_name, labels).pools,
            in_use=allocated.in_use,
            namespaces=namespaces,
            node_name=node_name,
            node_labels=labels,
            consumed_capacity=allocated.consumed_capacity,
            taint_rules=tuple(rules),
        )
