"""The ready plugins' pure logic: device layout, NUMA-packed preference, health file, path IDs."""

from __future__ import annotations

import asyncio
import re

import pytest

from kubedevice.plugin import ConfigError, Device
from kubedevice.plugin.builtin import FakeConfig, path_device_id, prefer_numa_packed
from kubedevice.plugin.builtin.fake import FakePlugin, HealthFile, parse_health_file
from kubedevice.plugin.builtin.fake_dra import BINDING_CONDITION, BindingMarker, DRAShape, parse_taint
from kubedevice.plugin.dra import AllocatedDevice, Claim, DeviceTaint
from kubedevice.plugin.dra.backend.slices import pool_content, standalone_slices
from kubedevice.plugin.dra.publication import publication
from kubedevice.plugin.dra.taints import TaintBook
from kubedevice.resource.slice_rules import validate_pool, validate_slice_spec


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
    assert parse_health_file("", known) == HealthFile()
    assert parse_health_file('["fake-1"]', known) == HealthFile(frozenset({"fake-1"}))
    assert parse_health_file('{"taints": {"fake-0": ["k=v:NoExecute"]}}', known) == HealthFile(
        frozenset(), {"fake-0": (DeviceTaint("k", "NoExecute", "v"),)}
    )
    with pytest.raises(ValueError, match=r"taint 'bad':? is not KEY\[=VALUE\]:EFFECT"):
        parse_health_file('{"taints": {"fake-0": ["bad"]}}', known)
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_health_file("[", known)
    with pytest.raises(ValueError, match="JSON list of device ID strings"):
        parse_health_file('{"fake-0": false}', known)
    with pytest.raises(ValueError, match="unknown device IDs: fake-9"):
        parse_health_file('["fake-9"]', known)


def test_path_device_ids() -> None:
    assert path_device_id("/dev/ttyUSB0", 1) == "dev_ttyUSB0-1"
    assert path_device_id("/dev/bus/usb 1", 0) == "dev_bus_usb_1-0"


def dra_fake(shape: DRAShape, count: int = 2, **kwargs: object) -> FakePlugin:
    return FakePlugin(FakeConfig("", count, driver="gpu.example.com", api="dra", shape=shape, **kwargs))  # type: ignore[arg-type]


def published_specs(plugin: FakePlugin) -> list[dict[str, object]]:
    devices = asyncio.run(plugin.devices())
    wanted = publication(plugin, TaintBook(plugin.health_taint), devices)
    content = pool_content(wanted.devices, wanted.counter_sets)
    docs = standalone_slices(driver="gpu.example.com", node_name="node-1", generation=1, content=content)
    for doc in docs:
        assert validate_slice_spec(doc["spec"]) == []
    assert validate_pool("node-1", [d["spec"] for d in docs]) == []
    return [d["spec"] for d in docs]


def test_fake_partitions_are_the_example_drivers() -> None:
    plugin = dra_fake(DRAShape(partitions=2))
    assert plugin.config.device_ids() == [
        "gpu-0-partition-0", "gpu-0-partition-1", "gpu-0-full",
        "gpu-1-partition-0", "gpu-1-partition-1", "gpu-1-full",
    ]  # fmt: skip
    counters, devices = published_specs(plugin)
    assert counters["sharedCounters"] == [  # type: ignore[index]
        {"name": f"gpu-{g}-counters", "counters": {"compute": {"value": "100"}, "memory": {"value": "80Gi"}}}
        for g in (0, 1)
    ]
    half = next(d for d in devices["devices"] if d["name"] == "gpu-1-partition-1")  # type: ignore[index, union-attr]
    assert half["consumesCounters"] == [
        {
            "counterSet": "gpu-1-counters",
            "counters": {"compute": {"value": "50"}, "memory": {"value": "40Gi"}},
        }
    ]
    assert half["attributes"]["partition"] == {"int": 1} and half["attributes"]["index"] == {"int": 1}
    assert half["capacity"] == {"compute": {"value": "50"}, "memory": {"value": "40Gi"}}


def test_fake_shared_devices_binding_conditions_and_taints() -> None:
    plugin = dra_fake(
        DRAShape(shared=True, binding_delay=2.0),
        taints=(parse_taint("example.com/broken=true:NoSchedule@gpu-1"), parse_taint("example.com/all:None")),
    )
    [spec] = published_specs(plugin)
    gpu0, gpu1 = spec["devices"]  # type: ignore[misc]
    assert gpu0["allowMultipleAllocations"] is True
    assert gpu0["capacity"]["memory"] == {
        "value": "80Gi",
        "requestPolicy": {"default": "80Gi", "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"}},
    }
    assert (gpu0["bindingConditions"], gpu0["bindingFailureConditions"]) == (
        ["BindingConditions"],
        ["BindingFailureConditions"],
    )
    assert [t["key"] for t in gpu0["taints"]] == ["example.com/all"]
    assert [(t["key"], t.get("value"), t["effect"]) for t in gpu1["taints"]] == [
        ("example.com/broken", "true", "NoSchedule"),
        ("example.com/all", None, "None"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"api": "device-plugin", "shape": DRAShape(partitions=2)}, "DRA features"),
        ({"taints": (parse_taint("k:None@gpu-9"),)}, "--taint names unknown devices: gpu-9"),
    ],
)
def test_fake_dra_settings_refused(kwargs: dict[str, object], message: str) -> None:
    config = {"resource": "example.com/f", "count": 2, "driver": "gpu.example.com", "api": "dra"} | kwargs
    with pytest.raises(ConfigError, match=re.escape(message)):
        FakeConfig(**config)  # type: ignore[arg-type]


def test_binding_marker_sets_each_allocation_once_after_its_delay() -> None:
    result = AllocatedDevice("gpu", "node-1", "gpu-0", "gpu-0", binding_conditions=(BINDING_CONDITION,))
    claim = Claim("u1", "default", "c1", (result,), driver="gpu.example.com")
    later = BindingMarker(3600.0)
    assert later.due([claim]) == [] and later.due([claim]) == []
    now = BindingMarker(0.0)
    assert now.due([claim]) == [(claim, result)]
    ready = {"conditions": [{"type": BINDING_CONDITION, "status": "True", "lastTransitionTime": None}]}
    done = Claim(
        "u1",
        "default",
        "c1",
        (result,),
        raw={
            "status": {
                "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0", **ready}]
            }
        },
        driver="gpu.example.com",
    )
    assert now.due([done]) == []
