"""Conversion between the SDK's plain data and the v1beta1 wire messages."""

from __future__ import annotations

from collections.abc import Sequence

from kubedevice.api.constants import HEALTHY, UNHEALTHY
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.plugin.model import Allocation, Device, DeviceSpec, Mount, PluginOptions


def device_to_wire(device: Device) -> dp.Device:
    message = dp.Device(ID=device.id, health=HEALTHY if device.healthy else UNHEALTHY)
    if device.numa_nodes:
        message.topology.nodes.extend(dp.NUMANode(ID=node) for node in device.numa_nodes)
    return message


def devices_to_wire(devices: Sequence[Device]) -> dp.ListAndWatchResponse:
    return dp.ListAndWatchResponse(devices=[device_to_wire(d) for d in devices])


def device_from_wire(message: dp.Device) -> Device:
    """The inverse of device_to_wire; only the exact string "Healthy" counts as healthy."""
    nodes = tuple(node.ID for node in message.topology.nodes) if message.HasField("topology") else ()
    return Device(id=message.ID, healthy=message.health == HEALTHY, numa_nodes=nodes)


def options_to_wire(options: PluginOptions) -> dp.DevicePluginOptions:
    return dp.DevicePluginOptions(
        pre_start_required=options.pre_start_required,
        get_preferred_allocation_available=options.get_preferred_allocation_available,
    )


def allocation_to_wire(allocation: Allocation) -> dp.ContainerAllocateResponse:
    return dp.ContainerAllocateResponse(
        envs=dict(allocation.envs),
        mounts=[
            dp.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in allocation.mounts
        ],
        devices=[
            dp.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in allocation.devices
        ],
        annotations=dict(allocation.annotations),
        cdi_devices=[dp.CDIDevice(name=name) for name in allocation.cdi_devices],
    )


def allocation_from_wire(message: dp.ContainerAllocateResponse) -> Allocation:
    """The inverse of allocation_to_wire; raises ValueError naming the field a plugin got wrong."""
    return Allocation(
        envs=dict(message.envs),
        mounts=tuple(Mount(m.container_path, m.host_path, m.read_only) for m in message.mounts),
        devices=tuple(DeviceSpec(d.container_path, d.host_path, d.permissions) for d in message.devices),
        annotations=dict(message.annotations),
        cdi_devices=tuple(c.name for c in message.cdi_devices),
    )
