"""What one allocation is asked for (the claims, classes, pools and devices in use), and the refusal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from kubedevice.resource.model import (
    DeviceClassDocument,
    DeviceID,
    NamespaceDocument,
    Pool,
    ResourceClaimSpec,
)

__all__ = ["ADMIN_ACCESS_LABEL", "UNSCHEDULABLE", "AllocationRequest", "ClaimToAllocate", "Unschedulable"]

#: The namespace label that allows `adminAccess` requests (the API server's check).
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


#: The scheduler's reason when no allocation or reservation is possible: the pod's status reason.
UNSCHEDULABLE = "Unschedulable"


class Unschedulable(Exception):
    """No allocation: the pod stays Pending with reason `Unschedulable` and this message."""

    reason = UNSCHEDULABLE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class ClaimToAllocate:
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
    #: Devices held by allocated claims (results with adminAccess excluded).
    in_use: Set[DeviceID]
    namespaces: Mapping[str, NamespaceDocument]
    node_name: str
