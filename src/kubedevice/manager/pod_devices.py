"""Which devices each container holds.

pod -> container -> resource -> (device IDs by NUMA node, allocate response).

This is what the checkpoint persists and what run options and PodResources are built from.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint import PodDevicesEntry
from kubedevice.manager.devices import NO_TOPOLOGY

log = logging.getLogger(__name__)

#: Device IDs of one container and resource, keyed by NUMA node (-1 = no topology). A device with several
#: NUMA nodes is listed under each of them.
DevicesPerNuma = dict[int, list[str]]


@dataclass(slots=True)
class ContainerDevices:
    """One container's devices of one resource and the plugin's answer to their Allocate."""

    devices_per_numa: DevicesPerNuma
    alloc_resp: dp.ContainerAllocateResponse
    #: The same as the checkpoint records it, built once: every later write reuses this very object, so
    #: the checkpoint encoder recognises it as unchanged and does not encode it again. None until the
    #: first write for entries restored from a checkpoint, so a restart serves without building them.
    checkpoint_entry: PodDevicesEntry | None = None

    def device_ids(self) -> set[str]:
        ids: set[str] = set()
        for group in self.devices_per_numa.values():
            ids.update(group)
        return ids


class PodDevices:
    """pod UID -> container name -> resource name -> ContainerDevices."""

    def __init__(self) -> None:
        self._pods: dict[str, dict[str, dict[str, ContainerDevices]]] = {}
        #: The checkpoint entries in `entries()` order, kept up to date on the usual append of a new
        #: pod; None when a change elsewhere means it must be rebuilt.
        self._checkpoint: list[PodDevicesEntry] | None = []

    def __contains__(self, pod_uid: object) -> bool:
        return pod_uid in self._pods

    def pod_uids(self) -> set[str]:
        return set(self._pods)

    def insert(
        self,
        pod_uid: str,
        container: str,
        resource: str,
        per_numa: DevicesPerNuma,
        resp: dp.ContainerAllocateResponse,
    ) -> None:
        containers = self._pods.setdefault(pod_uid, {})
        resources = containers.setdefault(container, {})
        appended = (
            resource not in resources
            and next(reversed(self._pods)) == pod_uid
            and next(reversed(containers)) == container
        )
        devices = resources[resource] = ContainerDevices(per_numa, resp)
        if appended and self._checkpoint is not None:
            self._checkpoint.append(_checkpoint_entry(pod_uid, container, resource, devices))
        else:
            self._checkpoint = None

    def delete(self, pod_uids: Iterable[str]) -> None:
        for uid in pod_uids:
            if self._pods.pop(uid, None) is not None:
                self._checkpoint = None

    def container_devices(self, pod_uid: str, container: str, resource: str) -> set[str] | None:
        """The device IDs a container holds of a resource, None when it holds none (no entry)."""
        entry = self._pods.get(pod_uid, {}).get(container, {}).get(resource)
        return None if entry is None else entry.device_ids()

    def container_resources(self, pod_uid: str, container: str) -> dict[str, ContainerDevices] | None:
        """Every resource entry of a container, None when the pod or the container is unknown."""
        pod = self._pods.get(pod_uid)
        if pod is None:
            return None
        return pod.get(container)

    def container_names(self, pod_uid: str) -> list[str]:
        return list(self._pods.get(pod_uid, {}))

    def devices(self) -> dict[str, set[str]]:
        """resource -> every device ID allocated to any container (the kubelet's allocatedDevices)."""
        out: dict[str, set[str]] = {}
        for containers in self._pods.values():
            for resources in containers.values():
                for resource, entry in resources.items():
                    ids = out.setdefault(resource, set())
                    for group in entry.devices_per_numa.values():
                        ids.update(group)
        return out

    def entries(self) -> Iterator[tuple[str, str, str, ContainerDevices]]:
        for pod_uid, containers in self._pods.items():
            for container, resources in containers.items():
                for resource, entry in resources.items():
                    yield pod_uid, container, resource, entry

    def holders_of(self, resource: str, device_ids: set[str]) -> set[str]:
        """UIDs of the pods holding any of `device_ids` of `resource`."""
        pods: set[str] = set()
        for pod_uid, _container, res, entry in self.entries():
            if res == resource and pod_uid not in pods and not entry.device_ids().isdisjoint(device_ids):
                pods.add(pod_uid)
        return pods

    def to_checkpoint(self) -> list[PodDevicesEntry]:
        """The entries to checkpoint, as a new list (a snapshot a writer thread may hold)."""
        if self._checkpoint is None:
            self._checkpoint = [_checkpoint_entry(*row) for row in self.entries()]
        return list(self._checkpoint)

    @classmethod
    def from_checkpoint(cls, entries: Iterable[PodDevicesEntry]) -> PodDevices:
        """Restore from checkpoint entries; an entry whose allocate response does not decode is skipped.

        A later entry for the same pod, container and resource replaces an earlier one, as `insert` does.
        """
        pod_devices = cls()
        # The checkpoint entries are built at the first write, not before the manager can serve.
        pod_devices._checkpoint = None
        pods = pod_devices._pods
        new_response = dp.ContainerAllocateResponse
        # One pass without `insert`'s bookkeeping: a restart restores 10^4 entries before serving.
        for e in entries:
            resp = new_response()
            if e.alloc_resp:
                try:
                    resp.ParseFromString(e.alloc_resp)
                except DecodeError as err:
                    log.error(
                        "skipping checkpoint entry pod %s container %s resource %s: bad AllocResp: %s",
                        e.pod_uid,
                        e.container_name,
                        e.resource_name,
                        err,
                    )
                    continue
            per_numa = {numa: list(ids) for numa, ids in e.device_ids.items()} if e.device_ids else {}
            containers = pods.get(e.pod_uid)
            if containers is None:
                containers = pods[e.pod_uid] = {}
            resources = containers.get(e.container_name)
            if resources is None:
                resources = containers[e.container_name] = {}
            resources[e.resource_name] = ContainerDevices(per_numa, resp)
        return pod_devices

    def device_topology(self, pod_uid: str, container: str) -> dict[str, dict[str, tuple[int, ...]]] | None:
        """resource -> device ID -> NUMA nodes (empty: no topology), from the NUMA keys."""
        resources = self.container_resources(pod_uid, container)
        if resources is None:
            return None
        out: dict[str, dict[str, tuple[int, ...]]] = {}
        for resource, entry in resources.items():
            if not entry.devices_per_numa:
                continue
            per_device: dict[str, tuple[int, ...]] = {}
            for numa, ids in sorted(entry.devices_per_numa.items()):
                for did in ids:
                    per_device[did] = () if numa == NO_TOPOLOGY else (*per_device.get(did, ()), numa)
            out[resource] = per_device
        return out


def _checkpoint_entry(
    pod_uid: str, container: str, resource: str, devices: ContainerDevices
) -> PodDevicesEntry:
    """The entry `devices` is checkpointed as, built on first use and then always the same object."""
    entry = devices.checkpoint_entry
    if entry is None:
        entry = devices.checkpoint_entry = PodDevicesEntry(
            pod_uid=pod_uid,
            container_name=container,
            resource_name=resource,
            device_ids={numa: list(ids) for numa, ids in devices.devices_per_numa.items()},
            alloc_resp=devices.alloc_resp.SerializeToString(),
        )
    return entry
