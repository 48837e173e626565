"""The ready plugins' pure logic: device layout, NUMA-packed preference, health file, path IDs."""

from __future__ import annotations

import pytest

from kubedevice.plugin import ConfigError, Device
from kubedevice.plugin.builtin import FakeConfig, path_device_id, prefer_numa_packed
from kubedevice.plugin.builtin.fake import parse_health_file


def test_numa_layouts() -> None:
    round_robin = FakeConfig("example.com/f", 4, numa_nodes=2)
    block = FakeConfig("example.com/f", 4, numa_nodes=2, numa_layout="block")
    assert [round_robin.numa_of(i) for i in range(4)] == [(0,), (1,), (0,), (1,)]
    assert [block.numa_of(i) for i in range(4)] == [(0,), (0,), (1,), (1,)]
    assert FakeConfig("example.com/f", 2).numa_of(1) == ()
    assert round_robin.device_ids() == ["fake-0", "fake-1", "fake-2", "fake-3"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resource": "fake", "count": 1}, "resource name"),
        ({"resource": "example.com/f", "count": -1}, "device count"),
        ({"resource": "example.com/f", "count": 1, "unhealthy": frozenset({"fake-1"})}, "fake-1"),
        ({"resource": "example.com/f", "count": 1, "poll_interval": 0}, "poll interval"),
    ],
)
def test_fake_config_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FakeConfig(**kwargs)  # type: ignore[arg-type]


def devices(layout: dict[int | None, list[str]]) -> list[Device]:
    return [
        Device(i, numa_nodes=() if node is None else (node,)) for node, ids in layout.items() for i in ids
    ]


def test_preferred_keeps_must_include_and_its_numa_node() -> None:
    available = devices({0: ["a0", "a1", "a2"], 1: ["b0", "b1"]})
    must = [d for d in available if d.id == "b1"]
    assert prefer_numa_packed(available, must, 2) == ["b1", "b0"]
    assert prefer_numa_packed(available, must, 4) == ["b1", "b0", "a0", "a1"]


def test_preferred_uses_the_fewest_nodes() -> None:
    available = devices({0: ["a0", "a1"], 1: ["b0", "b1", "b2"], None: ["n0"]})
    # Node 0 alone covers 2 and is the tightest fit; node 1 alone covers 3.
    assert prefer_numa_packed(available, [], 2) == ["a0", "a1"]
    assert prefer_numa_packed(available, [], 3) == ["b0", "b1", "b2"]
    # Nothing covers 4 alone: the biggest node first, then the next.
    assert prefer_numa_packed(available, [], 4) == ["b0", "b1", "b2", "a0"]
    assert prefer_numa_packed(available, [], 6) == ["b0", "b1", "b2", "a0", "a1", "n0"]


def test_health_file_parsing() -> None:
    known = {"fake-0", "fake-1"}
    assert parse_health_file("", known) == frozenset()
    assert parse_health_file('["fake-1"]', known) == {"fake-1"}
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_health_file("[", known)
    with pytest.raises(ValueError, match="JSON list of device ID strings"):
        parse_health_file('{"fake-0": false}', known)
    with pytest.raises(ValueError, match="unknown device IDs: fake-9"):
        parse_health_file('["fake-9"]', known)


def test_path_device_ids() -> None:
    assert path_device_id("/dev/ttyUSB0", 1) == "dev_ttyUSB0-1"
    assert path_device_id("/dev/bus/usb 1", 0) == "dev_bus_usb_1-0"
