"""Sharing's pure parts: replica IDs, the spreading choice, SharedDevices, and lists it will not expand."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from kubedevice.plugin import Device, DevicePlugin, SharedDevices, SharedPlugin
from kubedevice.plugin.sharing import physical_id, replica_id, spread_replicas


def test_replica_ids_round_trip_even_when_the_physical_id_has_the_separator() -> None:
    for physical in ("gpu-0", "a::b", "x::1"):
        for k in (0, 7, 12):
            assert physical_id(replica_id(physical, k)) == physical
    assert replica_id("gpu-0", 2) == "gpu-0::2"


def _replicas(*devices: str, per: int = 2) -> list[str]:
    return [replica_id(d, k) for d in devices for k in range(per)]


def _devices(*ids: str) -> list[Device]:
    return [Device(i) for i in ids]


def test_spread_takes_the_least_used_device_and_breaks_ties_by_the_plugins_order() -> None:
    available = [r for r in _replicas("a", "b", "c") if r != "c::0"]
    order = _devices("c", "b", "a")
    assert spread_replicas(available, [], 1, 2, order) == ["b::0"]
    assert spread_replicas(available, [], 3, 2, order) == ["b::0", "a::0", "c::1"]
    # Without the plugin's devices (devices it no longer lists), by ID.
    assert spread_replicas(available, [], 2, 2) == ["a::0", "b::0"]


def test_spread_puts_must_include_first_and_never_repeats_it() -> None:
    available = _replicas("a", "b")
    order = _devices("a", "b")
    assert spread_replicas(available, ["b::1", "b::1"], 3, 2, order) == ["b::1", "a::0", "a::1"]
    assert spread_replicas(available, ["a::1"], 1, 2, order) == ["a::1"]
    assert spread_replicas(available, [], 9, 2, order) == ["a::0", "b::0", "a::1", "b::1"]
    assert spread_replicas([], [], 1, 2) == []


def test_spread_keeps_a_containers_replicas_on_the_numa_node_of_its_first() -> None:
    devices = [
        Device("n0-a", numa_nodes=(0,)),
        Device("n1-a", numa_nodes=(1,)),
        Device("n0-b", numa_nodes=(0,)),
    ]
    available = _replicas("n0-a", "n1-a", "n0-b", per=3)
    assert spread_replicas(available, [], 3, 3, devices) == ["n0-a::0", "n0-b::0", "n0-a::1"]
    # Node 0 full: the rest spills over to node 1.
    assert spread_replicas(available, [], 7, 3, devices)[-1] == "n1-a::0"
    # One device busier than the rest picks the idle one first, then stays on its node.
    busy = [r for r in available if r not in ("n0-a::0", "n0-a::1")]
    assert spread_replicas(busy, [], 2, 3, devices) == ["n1-a::0", "n1-a::1"]
    # Devices without NUMA nodes are never "on" the picks' node.
    mixed = [*devices, Device("plain")]
    assert spread_replicas([*available, "plain::0"], ["plain::0"], 2, 3, mixed) == ["plain::0", "n0-a::0"]


def test_shared_devices_is_a_sequence_of_physical_devices_with_counts() -> None:
    gpu0, gpu1 = Device("gpu-0"), Device("gpu-1", numa_nodes=(1,))
    shared = SharedDevices.of([(gpu1, 2), (gpu0, 1)])
    assert list(shared) == [gpu1, gpu0] and len(shared) == 2 and shared[0] is gpu1 and gpu0 in shared
    assert list(shared[1:]) == [gpu0]
    assert (shared.replicas_of(gpu1), shared.replicas_of("gpu-0"), shared.replicas_of("gpu-9")) == (2, 1, 0)
    assert shared.total == 3
    with pytest.raises(ValueError, match="at least 1"):
        SharedDevices((gpu0,), {"gpu-0": 0})
    with pytest.raises(ValueError, match="at least 1"):
        SharedDevices((gpu0, gpu1), {"gpu-0": 1})


class Listed(DevicePlugin):
    resource_name = "example.com/gpu"

    def __init__(self, *lists: Sequence[object]) -> None:
        self.lists = lists

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        for devices in self.lists:
            yield devices  # type: ignore[misc]


async def test_a_list_the_inventory_would_refuse_is_passed_on_unexpanded() -> None:
    duplicate = [Device("gpu-0"), Device("gpu-0")]
    stranger = [Device("gpu-0"), "gpu-1"]
    good = [Device("gpu-0", False, (1,))]
    shared = SharedPlugin(Listed(duplicate, stranger, good), 2)
    seen = [list(devices) async for devices in shared.watch_devices()]
    assert seen == [duplicate, stranger, [Device("gpu-0::0", False, (1,)), Device("gpu-0::1", False, (1,))]]
    assert shared.describe_source() == "watch"
