"""The checkpoint's data: what the kubelet's `checkpointData` holds, and what a read returns.

Go distinguishes a nil slice or map from an empty one, and both the checksum and the JSON show the
difference (``<nil>``/``null`` versus ``[]``/``map[]``/``{}``), so the dataclasses keep ``None`` apart from
empty containers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PodDevicesEntry:
    """The devices of one resource given to one container, as the kubelet records them."""

    pod_uid: str
    container_name: str
    resource_name: str
    #: NUMA node -> device IDs; -1 means no topology; None is Go's nil map (JSON null).
    device_ids: dict[int, list[str]] | None
    #: Serialized v1beta1.ContainerAllocateResponse; None is Go's nil slice (JSON null).
    alloc_resp: bytes | None


@dataclass(frozen=True, slots=True)
class CheckpointData:
    """The checkpointed state: allocations and the resources that were registered."""

    #: None is Go's nil slice (JSON null), which the kubelet writes when nothing is allocated.
    pod_device_entries: list[PodDevicesEntry] | None
    #: Resource -> its healthy device IDs at write time; None is Go's nil map (JSON null).
    registered_devices: dict[str, list[str]] | None


@dataclass(frozen=True, slots=True)
class DecodedCheckpoint:
    """A checkpoint as read from bytes."""

    data: CheckpointData
    #: The checksum as found in the file.
    checksum: int
    #: 2, or 1 for a pre-1.20 file whose device IDs were moved to NUMA node 0.
    format_version: int


@dataclass(frozen=True, slots=True)
class UnverifiedCheckpoint:
    """A checkpoint decoded without trusting its checksum, for inspection tools."""

    decoded: DecodedCheckpoint
    #: The checksum the content hashes to (with the algorithm of its format version).
    computed_checksum: int

    @property
    def valid(self) -> bool:
        return self.decoded.checksum == self.computed_checksum
