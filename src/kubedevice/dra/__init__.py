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
    ClaimSource,
    ConsumerReference,
    ContainerClaim,
    DeviceRequestAllocationResult,
    DRAContainer,
    DRAPod,
    DriverClaim,
    ExtendedResourceClaimStatus,
    OwnerReference,
    PodClaim,
    RequestMapping,
    ResourceClaim,
)

__all__ = [
    "AllocationResult",
    "ClaimNotFoundError",
    "ClaimResource",
    "ClaimSource",
    "ConsumerReference",
    "Container",
    "ContainerClaim",
    "ContainerClaimsError",
    "DRACallError",
    "DRACheckpointError",
    "DRAContainer",
    "DRAError",
    "DRAManager",
    "DRAPod",
    "DeviceRequestAllocationResult",
    "DriverClaim",
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

#: The names these had before the DRA manager's pod and container were told apart from the device manager's
#: (`kubedevice.manager.Pod`); kept so that code written against them still imports.
Pod = DRAPod
Container = DRAContainer
