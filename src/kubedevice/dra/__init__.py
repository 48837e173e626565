"""The node side's second manager: the kubelet's DRA manager (`pkg/kubelet/cm/dra`) as a library.

It knows nothing of the node daemon, manifests or HTTP: pods come from the caller, claims from a
ClaimSource, drivers register through the plugins_registry watcher (kubedevice.pluginwatcher) with
`DRAManager.plugin_handler`.

Public API: :class:`DRAManager`, the plain data it takes and returns, and its errors.
"""

from kubedevice.dra.container_claims import ClaimResource, DynamicResource
from kubedevice.dra.errors import (
    ContainerClaimsError,
    DRACallError,
    DRACheckpointError,
    DRAError,
    DriverLookupError,
    PrepareError,
    UnprepareError,
)
from kubedevice.dra.manager import DRAManager
from kubedevice.dra.types import (
    AllocationResult,
    ClaimNotFoundError,
    ClaimRef,
    ClaimSource,
    ConsumerReference,
    Container,
    ContainerClaim,
    DeviceRequestAllocationResult,
    ExtendedResourceClaimStatus,
    OwnerReference,
    Pod,
    PodClaim,
    RequestMapping,
    ResourceClaim,
)

__all__ = [
    "AllocationResult",
    "ClaimNotFoundError",
    "ClaimRef",
    "ClaimResource",
    "ClaimSource",
    "ConsumerReference",
    "Container",
    "ContainerClaim",
    "ContainerClaimsError",
    "DRACallError",
    "DRACheckpointError",
    "DRAError",
    "DRAManager",
    "DeviceRequestAllocationResult",
    "DriverLookupError",
    "DynamicResource",
    "ExtendedResourceClaimStatus",
    "OwnerReference",
    "Pod",
    "PodClaim",
    "PrepareError",
    "RequestMapping",
    "ResourceClaim",
    "UnprepareError",
]
