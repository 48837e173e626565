"""The scheduler's DRA allocation as a library: slices, classes and claims in, the allocation (or why there is
none) out. Imports nothing of the daemon and does no I/O; docs/scheduler.md describes this face.

    request = AllocationRequest.from_documents(documents, node_name="node-1")
    allocations = allocate(request, CelSelectors())   # or Unschedulable(message)
"""

from kubedevice.scheduler.allocated import AllocatedState
from kubedevice.scheduler.allocator import allocate
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.scheduler.explanation import RequestExplanation, RuledOut
from kubedevice.scheduler.pools import SliceReport, SliceScan, gather_pools
from kubedevice.scheduler.request import (
    ADMIN_ACCESS_LABEL,
    HOSTNAME_LABEL,
    AllocationRequest,
    ClaimToAllocate,
    Unschedulable,
)

__all__ = [
    "ADMIN_ACCESS_LABEL",
    "HOSTNAME_LABEL",
    "AllocatedState",
    "AllocationRequest",
    "CelSelectors",
    "ClaimToAllocate",
    "RequestExplanation",
    "RuledOut",
    "SliceReport",
    "SliceScan",
    "Unschedulable",
    "allocate",
    "gather_pools",
]
