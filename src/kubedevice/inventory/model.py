"""A node's PodResources answers as plain data: devices held by containers, and the allocatable devices."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.inventory.dra import HeldClaimDevice, claim_devices

#: resource -> device ID -> its NUMA nodes (empty: the device reports no topology).
DeviceTopology = dict[str, dict[str, tuple[int, ...]]]

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[int, str], ...]:
    """Sorts "gpu-2" before "gpu-10", as an operator reads device IDs."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in _DIGITS.split(text) if p)


def numa_label(nodes: tuple[int, ...]) -> str:
    """A device's NUMA nodes as one label value: "0", "0,1", or "" for a device without topology."""
    return ",".join(str(n) for n in nodes)


@dataclass(frozen=True, slots=True)
class HeldDevice:
    """One device given to one container, as PodResources List reports it."""

    namespace: str
    pod: str
    container: str
    resource: str
    device: str
    numa_nodes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PodResourcesView:
    """One List and one GetAllocatableResources answer, read back to back."""

    held: tuple[HeldDevice, ...]
    #: GetAllocatableResources: the healthy devices of every resource (the kubelet lists no others);
    #: None from a kubelet that does not offer it.
    allocatable: DeviceTopology | None
    #: The devices of the DRA claims each container uses (GetAllocatableResources has none of DRA's).
    claim_devices: tuple[HeldClaimDevice, ...] = ()

    def held_ids(self) -> dict[str, set[str]]:
        """resource -> the device IDs some container holds."""
        out: dict[str, set[str]] = {}
        for h in self.held:
            out.setdefault(h.resource, set()).add(h.device)
        return out


def _merge(topology: dict[str, dict[str, set[int]]], d: pr.ContainerDevices) -> None:
    # The kubelet sends one ContainerDevices per device per NUMA node: fold them back into one device.
    per_device = topology.setdefault(d.resource_name, {})
    nodes = [n.ID for n in d.topology.nodes] if d.HasField("topology") else []
    for device_id in d.device_ids:
        per_device.setdefault(device_id, set()).update(nodes)


def _frozen(topology: dict[str, dict[str, set[int]]]) -> DeviceTopology:
    return {r: {d: tuple(sorted(n)) for d, n in ids.items()} for r, ids in topology.items()}


def held_devices(pod_resources: Iterable[pr.PodResources]) -> tuple[HeldDevice, ...]:
    """One HeldDevice per device of every container, in the order List gave them."""
    out: list[HeldDevice] = []
    # Namespaces, container and resource names repeat across 10,000 containers: one string each, not
    # one per container (protobuf hands out a new str on every read).
    names: dict[str, str] = {}
    numa: dict[tuple[int, ...], tuple[int, ...]] = {}
    for p in pod_resources:
        namespace = names.setdefault(p.namespace, p.namespace)
        for c in p.containers:
            if not c.devices:
                continue
            container = names.setdefault(c.name, c.name)
            topology: dict[str, dict[str, set[int]]] = {}
            for d in c.devices:
                _merge(topology, d)
            for resource, ids in _frozen(topology).items():
                resource = names.setdefault(resource, resource)
                out.extend(
                    HeldDevice(namespace, p.name, container, resource, device, numa.setdefault(nodes, nodes))
                    for device, nodes in ids.items()
                )
    return tuple(out)


def allocatable_devices(devices: Iterable[pr.ContainerDevices]) -> DeviceTopology:
    topology: dict[str, dict[str, set[int]]] = {}
    for d in devices:
        _merge(topology, d)
    return _frozen(topology)


def view_of(
    listed: pr.ListPodResourcesResponse, allocatable: pr.AllocatableResourcesResponse | None
) -> PodResourcesView:
    return PodResourcesView(
        held=held_devices(listed.pod_resources),
        allocatable=allocatable_devices(allocatable.devices) if allocatable is not None else None,
        claim_devices=claim_devices(listed.pod_resources),
    )
