"""Per-resource device bookkeeping: the last ListAndWatch snapshot as healthy / unhealthy sets and topology.

A snapshot replaces everything the resource had. Only the exact string "Healthy" is healthy.
Applying a snapshot touches each device once and keeps no per-device objects beyond the ID strings, their
health class and the NUMA nodes of devices that report any, so 10^6 devices stay cheap.

A plugin usually resends the same list with a few devices changed (a health flip). `ResourceDevices.apply`
therefore also keeps each device's wire bytes from the last snapshot: the next one is compared with them
position by position in C, and only the devices whose bytes differ are decoded and applied, so flipping
1% of 100,000 devices costs about 1,000 devices' work instead of 100,000. Anything unusual (another
length, many changes, duplicate IDs, a disconnect in between) takes the full path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import ne

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from kubedevice.api.constants import HEALTHY, UNHEALTHY
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp

#: The NUMA key under which a device without topology is recorded (the kubelet's nodeWithoutTopology).
NO_TOPOLOGY = -1


@dataclass(slots=True)
class SnapshotReport:
    """What applying one snapshot found wrong in it (the plugin gets no answer; this is logged and kept)."""

    duplicate_ids: list[str] = field(default_factory=list)
    unknown_health: dict[str, str] = field(default_factory=dict)

    def warning(self, resource_name: str) -> str | None:
        parts: list[str] = []
        if self.duplicate_ids:
            shown = ", ".join(repr(i) for i in self.duplicate_ids[:5])
            more = f" and {len(self.duplicate_ids) - 5} more" if len(self.duplicate_ids) > 5 else ""
            parts.append(
                f"duplicate device IDs in one ListAndWatch snapshot for {resource_name}: {shown}{more}; "
                "the last occurrence of each was kept"
            )
        if self.unknown_health:
            shown = ", ".join(f"{i!r}={h!r}" for i, h in list(self.unknown_health.items())[:5])
            more = f" and {len(self.unknown_health) - 5} more" if len(self.unknown_health) > 5 else ""
            parts.append(
                f"unknown health strings for {resource_name} (only {HEALTHY!r} is healthy, the rest count as "
                f"{UNHEALTHY!r}): {shown}{more}"
            )
        return "; ".join(parts) or None


def _device_bytes_class() -> type[Message]:
    """A message with ListAndWatchResponse's wire shape whose devices stay bytes: field 1, repeated."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="kubedevice/manager/device_bytes.proto", package="kubedevice.manager", syntax="proto3"
    )
    message = proto.message_type.add(name="DeviceBytes")
    message.field.add(
        name="devices",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kubedevice.manager.DeviceBytes"))


_DEVICE_BYTES = _device_bytes_class()
#: Above this share of changed devices the full path is as cheap as the diff.
_DIFF_MAX_SHARE = 8


class Snapshot:
    """One ListAndWatch message as it came off the wire, decoded only as far as applying it needs."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    @classmethod
    def of(cls, devices: Iterable[dp.Device]) -> Snapshot:
        return cls(dp.ListAndWatchResponse(devices=devices).SerializeToString())

    @property
    def devices(self) -> Sequence[dp.Device]:
        """Every device, decoded (raises google.protobuf.message.DecodeError on a malformed message)."""
        return dp.ListAndWatchResponse.FromString(self.raw).devices

    def device_bytes(self) -> list[bytes]:
        """Each device's own wire bytes, in message order."""
        return list(_DEVICE_BYTES.FromString(self.raw).devices)  # type: ignore[attr-defined]


@dataclass(slots=True)
class ResourceDevices:
    """The devices of one resource as last reported by its plugin."""

    healthy: set[str] = field(default_factory=set)
    unhealthy: set[str] = field(default_factory=set)
    #: NUMA nodes of each device that reports at least one; devices absent here have no topology.
    topology: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: IDs the last snapshot reported healthy; unlike `healthy`, a disconnect does not clear it.
    reported_healthy: set[str] = field(default_factory=set)
    #: False for a resource known only from the checkpoint: no snapshot has arrived yet.
    reported: bool = False
    #: Each device's wire bytes in the last snapshot applied by `apply`; None: the next takes the full path.
    _last_bytes: list[bytes] | None = field(default=None, init=False, repr=False)
    _unknown_health: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    @property
    def has_topology(self) -> bool:
        """The kubelet's "topology alignment": at least one device reports a NUMA node."""
        return bool(self.topology)

    def numa_nodes_of(self, device_id: str) -> tuple[int, ...]:
        return self.topology.get(device_id, ())

    def apply(self, snapshot: Snapshot) -> SnapshotReport:
        """Replace the state with one ListAndWatch message, decoding only what changed since the last one.

        Same result as `apply_snapshot(snapshot.devices)`. Raises DecodeError on a malformed message.
        """
        raw = snapshot.device_bytes()
        last = self._last_bytes
        if last is not None and len(last) == len(raw):
            changed = list(compress(range(len(raw)), map(ne, last, raw)))
            if len(changed) * _DIFF_MAX_SHARE <= len(raw) and self._apply_changes(
                [dp.Device.FromString(last[i]) for i in changed],
                [dp.Device.FromString(raw[i]) for i in changed],
            ):
                self._last_bytes = raw
                return SnapshotReport(unknown_health=dict(self._unknown_health))
        report = self.apply_snapshot(snapshot.devices)
        if not report.duplicate_ids:
            self._last_bytes = raw
        return report

    def _apply_changes(self, old: list[dp.Device], new: list[dp.Device]) -> bool:
        """Swap the devices `old` for `new`; False (and nothing changed) if that would duplicate an ID."""
        old_ids = {d.ID for d in old}
        new_ids = {d.ID for d in new}
        if len(new_ids) != len(new) or len(old_ids) != len(old):
            return False
        healthy, unhealthy = self.healthy, self.unhealthy
        for did in new_ids - old_ids:
            if did in healthy or did in unhealthy:
                return False
        topology, reported, unknown = self.topology, self.reported_healthy, self._unknown_health
        for did in old_ids:
            healthy.discard(did)
            unhealthy.discard(did)
            reported.discard(did)
            topology.pop(did, None)
            unknown.pop(did, None)
        for d in new:
            did = d.ID
            if d.health == HEALTHY:
                healthy.add(did)
                reported.add(did)
            else:
                unhealthy.add(did)
                if d.health != UNHEALTHY:
                    unknown[did] = d.health
            if d.topology.nodes:
                topology[did] = tuple([n.ID for n in d.topology.nodes])
        return True

    def apply_snapshot(self, devices: Sequence[dp.Device]) -> SnapshotReport:
        """Replace the state with one ListAndWatch message. Returns what was wrong with it."""
        self._last_bytes = None
        healthy: set[str] = set()
        unhealthy: set[str] = set()
        topology: dict[str, tuple[int, ...]] = {}
        unknown: dict[str, str] = {}
        add_healthy = healthy.add
        add_unhealthy = unhealthy.add
        count = 0
        # Devices usually sit on one NUMA node: share one tuple per node instead of one per device.
        single: dict[int, tuple[int]] = {}
        for d in devices:
            count += 1
            did = d.ID
            health = d.health
            if health == HEALTHY:
                add_healthy(did)
            else:
                add_unhealthy(did)
                if health != UNHEALTHY:
                    unknown[did] = health
            if d.HasField("topology"):
                nodes = d.topology.nodes
                k = len(nodes)
                if k == 1:
                    nid = nodes[0].ID
                    shared = single.get(nid)
                    if shared is None:
                        shared = single[nid] = (nid,)
                    topology[did] = shared
                elif k:
                    topology[did] = tuple([n.ID for n in nodes])
        report = SnapshotReport(unknown_health=unknown)
        if count != len(healthy) + len(unhealthy) or healthy & unhealthy:
            # Duplicates are rare: redo the message slowly so the last occurrence wins, as the kubelet's
            # map assignment does, but without counting a device twice.
            healthy, unhealthy, topology, report = _apply_with_duplicates(devices)
        self.healthy = healthy
        self.unhealthy = unhealthy
        self.topology = topology
        self.reported_healthy = set(healthy)
        self.reported = True
        self._unknown_health = dict(report.unknown_health)
        return report

    def mark_unhealthy(self) -> None:
        """The plugin went away: every device becomes unhealthy, topology stays."""
        self._last_bytes = None  # healthy no longer matches the last snapshot: no diff against it
        if self.healthy:
            self.unhealthy |= self.healthy
            self.healthy = set()

    @property
    def capacity(self) -> int:
        return len(self.healthy) + len(self.unhealthy)

    def device_health(self, device_id: str) -> str | None:
        """The health the last snapshot reported for a device, None if it did not report it."""
        if device_id in self.reported_healthy:
            return HEALTHY
        if device_id in self.unhealthy or device_id in self.healthy:
            return UNHEALTHY
        return None


def _apply_with_duplicates(
    devices: Sequence[dp.Device],
) -> tuple[set[str], set[str], dict[str, tuple[int, ...]], SnapshotReport]:
    last: dict[str, dp.Device] = {}
    seen_twice: dict[str, None] = {}
    for d in devices:
        if d.ID in last:
            seen_twice[d.ID] = None
        last[d.ID] = d
    healthy: set[str] = set()
    unhealthy: set[str] = set()
    topology: dict[str, tuple[int, ...]] = {}
    unknown: dict[str, str] = {}
    for did, d in last.items():
        if d.health == HEALTHY:
            healthy.add(did)
        else:
            unhealthy.add(did)
            if d.health != UNHEALTHY:
                unknown[did] = d.health
        if d.topology.nodes:
            topology[did] = tuple(n.ID for n in d.topology.nodes)
    return healthy, unhealthy, topology, SnapshotReport(list(seen_twice), unknown)
