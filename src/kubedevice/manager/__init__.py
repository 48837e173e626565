"""The node side: a device manager that does what the kubelet's does, and its parts.

Public API: :class:`DeviceManager` and the plain data it takes and returns.
"""

from kubedevice.manager.allocator import ActivePods, AffinityStore
from kubedevice.manager.errors import (
    AdmissionError,
    DeviceManagerError,
    PluginCallError,
    RegistrationError,
    RunOptionsError,
)
from kubedevice.manager.manager import DeviceManager
from kubedevice.manager.types import (
    Change,
    Container,
    DeviceInfo,
    MountInfo,
    Pod,
    ResourceStatus,
    RunContainerOptions,
    TopologyHint,
)
from kubedevice.resource.names import is_extended_resource_name

__all__ = [
    "ActivePods",
    "AdmissionError",
    "AffinityStore",
    "Change",
    "Container",
    "DeviceInfo",
    "DeviceManager",
    "DeviceManagerError",
    "MountInfo",
    "PluginCallError",
    "Pod",
    "RegistrationError",
    "ResourceStatus",
    "RunContainerOptions",
    "RunOptionsError",
    "TopologyHint",
    "is_extended_resource_name",
]
