"""The DRA face of the plugin SDK: a DevicePlugin served as a DRA kubelet plugin.

Set `driver_name` on the plugin and serve it with ``serve(plugin, api="dra")`` (or ``"both"``). The
`prepare` hook, if the plugin has one, gets a `Claim` and answers `PreparedDevice`s; `unprepare` gets a
`ClaimRef`. Without them the SDK prepares each claim with `allocate()`. A device's DRA fields (counters it
consumes, taints, shared capacities, binding conditions) are the types of `device_model`.
"""

from kubedevice.plugin.dra.backend_api import ClaimFetchError, ClaimStatusError
from kubedevice.plugin.dra.device_model import (
    CapacityRange,
    CapacityRequestPolicy,
    CounterSet,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    TaintEffect,  # noqa: F401  (importable; DeviceTaint's section lists the effects)
)
from kubedevice.plugin.dra.model import AllocatedDevice, Claim, ClaimRef, PreparedDevice
from kubedevice.resource.device_status import DeviceCondition, NetworkDeviceData

__all__ = [
    "AllocatedDevice",
    "CapacityRange",
    "CapacityRequestPolicy",
    "Claim",
    "ClaimFetchError",
    "ClaimRef",
    "ClaimStatusError",
    "CounterSet",
    "DeviceCapacity",
    "DeviceCondition",
    "DeviceCounterConsumption",
    "DeviceTaint",
    "NetworkDeviceData",
    "PreparedDevice",
]
