"""What a node's devices are doing, read from PodResources v1: shared by `kubedevice exporter` and `top`."""

from kubedevice.inventory.dra import HeldClaimDevice
from kubedevice.inventory.model import HeldDevice, PodResourcesView, natural_key
from kubedevice.inventory.reader import ErrorKind, PodResourcesError, PodResourcesReader

__all__ = [
    "ErrorKind",
    "HeldClaimDevice",
    "HeldDevice",
    "PodResourcesError",
    "PodResourcesReader",
    "PodResourcesView",
    "natural_key",
]
