"""`SharedPlugin`: one physical device advertised as N replicas, so N containers can share it.

Wrap any DevicePlugin: `serve(SharedPlugin(MyGpus(), replicas=4))`. Each physical device `gpu-0` is then
advertised as `gpu-0::0 .. gpu-0::3` with the physical device's health and NUMA nodes, and every call from
the kubelet is mapped back before the wrapped plugin sees it:

* `allocate` and `pre_start_container` get a `SharedDevices`: the physical devices behind the container's
  replicas, each once, with how many replicas of each it got (`devices.replicas_of(d)`). It is a
  `Sequence[Device]`, so a plugin written without sharing in mind works unchanged;
* GetPreferredAllocation is always offered and answered here: replicas go to the least-used physical
  devices (counting replicas other containers hold), so the kubelet spreads containers instead of stacking
  them on the first device; a container's further replicas stay on the NUMA node(s) of its first. The
  wrapped plugin's own `preferred_allocation` is not called: it would choose among physical devices;
* `resource_name` renames the shared resource (e.g. `example.com/gpu.shared`), so a node can tell pods
  that accept a shared device from pods that need a whole one;
* `refuse_multiple` refuses a container that asks for more than one replica in total (INVALID_ARGUMENT):
  a replica is a time slice, not a share that adds up, so a pod asking for two would expect a guarantee
  that sharing cannot give.
* the wrapped plugin's CDI spec (`cdi_spec`) defines the physical devices, the ones its `allocate` names.

Health is the physical device's: one flip turns all its replicas in the same ListAndWatch update.
Sharing is time-slicing by contract only; the wrapped plugin decides what isolation a container gets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import overload

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi.spec import CDISpec
from kubedevice.plugin.errors import ConfigError, InvalidRequest
from kubedevice.plugin.model import Allocation, Device, PluginOptions
from kubedevice.plugin.naming import check_resource_name

#: Between a physical device ID and the replica number: `gpu-0::2` is replica 2 of `gpu-0`.
REPLICA_SEPARATOR = "::"


def replica_id(physical_id: str, index: int) -> str:
    """The ID of replica `index` (from 0) of a physical device."""
    return f"{physical_id}{REPLICA_SEPARATOR}{index}"


def physical_id(replica: str) -> str:
    """The physical device ID a replica ID names (`gpu-0::2` -> `gpu-0`)."""
    physical, _, _ = replica.rpartition(REPLICA_SEPARATOR)
    return physical


def _replica_index(replica: str) -> int:
    return int(replica.rpartition(REPLICA_SEPARATOR)[2])


@dataclass(frozen=True)
class SharedDevices(Sequence[Device]):
    """The physical devices behind one container's replicas, each once, with its replica count per device.

    Iterating gives the physical devices in the order their first replica was requested; `replicas` maps
    each physical device ID to how many of its replicas the container got (at least 1).
    """

    #: The physical devices, each once, in the order their first replica was requested.
    devices: tuple[Device, ...]
    #: Physical device ID -> how many of its replicas the container got (at least 1).
    replicas: Mapping[str, int]

    def __post_init__(self) -> None:
        if (
            sorted(self.replicas) != sorted(d.id for d in self.devices)
            or min(self.replicas.values(), default=1) < 1
        ):
            raise ValueError(
                f"replica counts {dict(self.replicas)} must give each of "
                f"{[d.id for d in self.devices]} at least 1"
            )

    @classmethod
    def of(cls, counted: Iterable[tuple[Device, int]]) -> SharedDevices:
        """Made from (physical device, replica count) pairs, in order."""
        pairs = list(counted)
        return cls(tuple(d for d, _ in pairs), {d.id: n for d, n in pairs})

    def replicas_of(self, device: Device | str) -> int:
        """How many replicas of `device` (a Device or its ID) the container got; 0 if none."""
        return self.replicas.get(device if isinstance(device, str) else device.id, 0)

    @property
    def total(self) -> int:
        """How many replicas the container got in all."""
        return sum(self.replicas.values())

    @overload
    def __getitem__(self, index: int) -> Device: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Device]: ...
    def __getitem__(self, index: int | slice) -> Device | Sequence[Device]:
        return self.devices[index]

    def __len__(self) -> int:
        return len(self.devices)


class SharedPlugin(DevicePlugin):
    """Serves `plugin`'s devices as `replicas` replicas each; see the module docstring.

    Serve the wrapper instead of the plugin: `serve(SharedPlugin(MyGpus(), replicas=4))`. `resource_name`
    (default: the plugin's) names the shared resource; `refuse_multiple` refuses a container asking for
    more than one replica. A `replicas` below 1 or a plugin without a device source is a ConfigError.
    """

    def __init__(
        self,
        plugin: DevicePlugin,
        replicas: int,
        *,
        resource_name: str | None = None,
        refuse_multiple: bool = False,
    ) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise ConfigError(f"replicas must be a whole number >= 1, got {replicas!r}")
        try:
            self._source = plugin.describe_source()
        except NotImplementedError as exc:
            raise ConfigError(str(exc)) from exc
        self.plugin = plugin
        self.replicas = replicas
        self.resource_name = check_resource_name(resource_name or plugin.resource_name)
        self.refuse_multiple = refuse_multiple
        self.poll_interval = plugin.poll_interval
        self.cdi_spec_dir = plugin.cdi_spec_dir
        #: The wrapped plugin's latest devices by ID, in its order (the order breaks ties when spreading).
        self._physical: dict[str, Device] = {}

    def describe_source(self) -> str:
        return self._source

    def options(self) -> PluginOptions:
        return replace(self.plugin.options(), get_preferred_allocation_available=True)

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        async for devices in self.plugin.watch_devices():
            physical = list(devices)
            if not _well_formed(physical):
                # Passed on as it is: the inventory refuses it with the message it gives any plugin.
                yield physical
                continue
            self._physical = {d.id: d for d in physical}
            yield [
                Device(replica_id(d.id, k), d.healthy, d.numa_nodes)
                for d in physical
                for k in range(self.replicas)
            ]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        if self.refuse_multiple and len(devices) > 1:
            ids = ", ".join(d.id for d in devices)
            raise InvalidRequest(
                f"request for {len(devices)} {self.resource_name} replicas ({ids}) refused: a container may "
                f"get at most 1 replica of a shared device — ask for {self.resource_name}: 1"
            )
        return await self.plugin.allocate(self._physical_of(devices))

    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        await self.plugin.pre_start_container(self._physical_of(devices))

    def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
        # CDI devices are the physical ones: the wrapped plugin's allocate sees and names those.
        return self.plugin.cdi_spec(list(self._physical.values()))

    async def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        return spread_replicas(
            [d.id for d in available],
            [d.id for d in must_include],
            size,
            self.replicas,
            list(self._physical.values()),
        )

    def _physical_of(self, replicas: Sequence[Device]) -> SharedDevices:
        counts: dict[str, int] = {}
        for device in replicas:
            physical = physical_id(device.id)
            counts[physical] = counts.get(physical, 0) + 1
        gone = sorted(p for p in counts if p not in self._physical)
        if gone:
            raise InvalidRequest(f"{self.resource_name} devices are gone: {', '.join(gone)}")
        return SharedDevices.of((self._physical[p], n) for p, n in counts.items())


def spread_replicas(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    replicas: int,
    devices: Sequence[Device] = (),
) -> list[str]:
    """Pick `size` replica IDs: must_include first, then one at a time from the least-used physical device.

    A physical device's use is its replicas that are not `available` (held by other containers; health is
    per physical device, so an unhealthy device has no replica available at all) plus those picked so far.
    Once a replica is picked, devices sharing a NUMA node with the picks come first, so a container with
    several replicas stays aligned, as NUMA-packed plugins keep it; ties go to the device earlier in
    `devices` (the plugin's physical devices, in its order), then by ID; within a device the lowest replica
    number goes first. Deterministic, so the kubelet's choice can be predicted.
    """
    numa = {d.id: frozenset(d.numa_nodes) for d in devices}
    rank = {d.id: i for i, d in enumerate(devices)}
    chosen = list(dict.fromkeys(must_include))
    free: dict[str, list[int]] = {}
    for rid in available:
        free.setdefault(physical_id(rid), []).append(_replica_index(rid))
    load = {p: replicas - len(ks) for p, ks in free.items()}
    home: set[int] = set()
    for rid in chosen:
        physical = physical_id(rid)
        load[physical] = load.get(physical, 0) + 1
        home |= numa.get(physical, frozenset())
        if _replica_index(rid) in free.get(physical, []):
            free[physical].remove(_replica_index(rid))
    for ks in free.values():
        ks.sort(reverse=True)  # popped from the end: lowest replica number first

    def preference(physical: str) -> tuple[bool, int, int, str]:
        away = bool(home) and not numa.get(physical, frozenset()) & home
        return away, load[physical], rank.get(physical, len(rank)), physical

    while len(chosen) < size:
        candidates = [p for p, ks in free.items() if ks]
        if not candidates:
            break
        physical = min(candidates, key=preference)
        chosen.append(replica_id(physical, free[physical].pop()))
        load[physical] += 1
        home |= numa.get(physical, frozenset())
    return chosen


def _well_formed(devices: Sequence[object]) -> bool:
    """Whether the list is Devices with distinct IDs (what the inventory accepts)."""
    ids = [d.id for d in devices if isinstance(d, Device)]
    return len(ids) == len(devices) and len(set(ids)) == len(ids)
