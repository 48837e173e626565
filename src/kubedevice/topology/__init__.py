"""The kubelet's topology manager: NUMA hints merged by a policy, per container or per pod, at admission.

Independent of the device manager and the node daemon: any object with `get_topology_hints`,
`get_pod_topology_hints` and `allocate` is a hint provider, and allocators read the chosen affinity back with
`TopologyManager.get_affinity(pod_uid, container_name)`.
"""

from kubedevice.topology.bitmask import BitMask, BitMaskError, iterate_bitmasks, narrowest
from kubedevice.topology.hint import NO_HINT, TopologyHint
from kubedevice.topology.manager import (
    TopologyConfig,
    TopologyConfigError,
    TopologyManager,
    new_manager,
    validate_config,
)
from kubedevice.topology.numa_info import (
    MachineTopology,
    NUMAInfo,
    NUMAInfoError,
    read_topology,
    synthetic_topology,
)
from kubedevice.topology.options import PolicyOptions, PolicyOptionsError, parse_option_pairs
from kubedevice.topology.policy import (
    POLICIES,
    POLICY_BEST_EFFORT,
    POLICY_NONE,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
    Policy,
    ProviderHints,
)
from kubedevice.topology.scope import (
    ERR_TOPOLOGY_AFFINITY,
    ERR_TOPOLOGY_AFFINITY_MESSAGE,
    SCOPE_CONTAINER,
    SCOPE_POD,
    SCOPES,
    AdmitResult,
    HintProvider,
)

__all__ = [
    "ERR_TOPOLOGY_AFFINITY",
    "ERR_TOPOLOGY_AFFINITY_MESSAGE",
    "NO_HINT",
    "POLICIES",
    "POLICY_BEST_EFFORT",
    "POLICY_NONE",
    "POLICY_RESTRICTED",
    "POLICY_SINGLE_NUMA_NODE",
    "SCOPES",
    "SCOPE_CONTAINER",
    "SCOPE_POD",
    "AdmitResult",
    "BitMask",
    "BitMaskError",
    "HintProvider",
    "MachineTopology",
    "NUMAInfo",
    "NUMAInfoError",
    "Policy",
    "PolicyOptions",
    "PolicyOptionsError",
    "ProviderHints",
    "TopologyConfig",
    "TopologyConfigError",
    "TopologyHint",
    "TopologyManager",
    "iterate_bitmasks",
    "narrowest",
    "new_manager",
    "parse_option_pairs",
    "read_topology",
    "synthetic_topology",
    "validate_config",
]
