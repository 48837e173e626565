"""Choosing devices: affinity filtering, topology hints and the picker."""

from __future__ import annotations

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager import TopologyHint
from kubedevice.manager.devices import ResourceDevices
from kubedevice.manager.free_devices import Picker, filter_by_affinity
from kubedevice.manager.topology_hints import generate_topology_hints


def resource(topology: dict[str, list[int]], unhealthy: frozenset[str] = frozenset()) -> ResourceDevices:
    devices = ResourceDevices()
    msg = [
        dp.Device(
            ID=d,
            health="Unhealthy" if d in unhealthy else "Healthy",
            topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=n) for n in nodes]),
        )
        for d, nodes in topology.items()
    ]
    devices.apply_snapshot(msg)
    return devices


def test_filter_by_affinity_kubelet_example() -> None:
    """TestFilterByAffinity: mask {2}; dev2 spans nodes 1 and 2."""
    devices = resource({"dev1": [1], "dev2": [1, 2], "dev3": [2], "dev4": [2]})
    mask = frozenset({2})
    assert filter_by_affinity({"dev1", "dev2"}, devices, mask) == ({"dev2"}, {"dev1"}, set())
    assert filter_by_affinity({"dev1", "dev2", "dev3", "dev4"}, devices, mask) == (
        {"dev2", "dev3", "dev4"},
        {"dev1"},
        set(),
    )


def test_filter_by_affinity_without_hint_or_topology() -> None:
    devices = resource({"a": [0], "b": []})
    assert filter_by_affinity({"a", "b"}, devices, None) == (set(), set(), {"a", "b"})
    assert filter_by_affinity({"a", "b"}, devices, frozenset({0})) == ({"a"}, set(), {"b"})
    flat = resource({"a": [], "b": []})
    assert filter_by_affinity({"a", "b"}, flat, frozenset({0})) == (set(), set(), {"a", "b"})


def test_filter_by_affinity_prefers_the_node_with_fewer_devices() -> None:
    # "x" spans nodes 0 and 1, both in the mask; node 1 has fewer available devices, so x counts there.
    devices = resource({"x": [0, 1], "a": [0], "b": [0], "c": [3]})
    aligned, unaligned, without = filter_by_affinity({"x", "a", "b", "c"}, devices, frozenset({0, 1}))
    assert aligned == {"x", "a", "b"} and unaligned == {"c"} and without == set()


def test_topology_hints_prefer_the_narrowest_masks() -> None:
    devices = resource({"a0": [0], "a1": [0], "b0": [1], "b1": [1]})
    available = {"a0", "a1", "b0", "b1"}
    hints = generate_topology_hints([0, 1], devices, available, set(), 2)
    assert hints == [
        TopologyHint.of((0,), True),
        TopologyHint.of((1,), True),
        TopologyHint.of(
            (
                0,
                1,
            ),
            False,
        ),
    ]
    assert generate_topology_hints([0, 1], devices, available, set(), 3) == [
        TopologyHint.of(
            (
                0,
                1,
            ),
            True,
        )
    ]
    assert generate_topology_hints([0, 1], devices, available, set(), 5) == []


def test_topology_hints_count_unhealthy_devices_for_the_narrowest_size() -> None:
    """minAffinitySize looks at every device, so a node that could fit when healthy stays "preferred"."""
    devices = resource({"a0": [0], "a1": [0], "b0": [1], "b1": [1]}, unhealthy=frozenset({"a1"}))
    hints = generate_topology_hints([0, 1], devices, {"a0", "b0", "b1"}, set(), 2)
    assert hints == [
        TopologyHint.of((1,), True),
        TopologyHint.of(
            (
                0,
                1,
            ),
            False,
        ),
    ]


def test_topology_hints_keep_reusable_devices_inside_the_mask() -> None:
    devices = resource({"a0": [0], "b0": [1], "b1": [1]})
    hints = generate_topology_hints([0, 1], devices, {"b0", "b1"}, {"a0"}, 2)
    # Every hint must contain node 0, where the reusable device is.
    assert hints == [
        TopologyHint.of(
            (
                0,
                1,
            ),
            False,
        )
    ]


def test_picker_takes_in_order_and_reserves() -> None:
    reserved: set[str] = set()
    picker = Picker(3, reserved)
    assert not picker.take(None)
    assert not picker.take({"d5", "d1"})
    assert picker.take({"d1", "d9", "d3", "d7"})
    assert picker.picked == {"d1", "d5", "d3"} and reserved == picker.picked
    picker.release()
    assert reserved == set()
    assert Picker(0, set()).take(None)
