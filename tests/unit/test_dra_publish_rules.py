"""What the SDK publishes for the DRA features of Kubernetes 1.37 (counter sets, taints, consumable capacity,
binding conditions), held to the API server's rules (kubedevice.resource.slice_rules, the ported
validateResourceSliceSpec and validatePool) and to the client library's models of resource.k8s.io/v1;
and those rules themselves, one refusal per row."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube.models.resource_v1 import ResourceSlice

from kubedevice.plugin.dra import (
    CapacityRange,
    CapacityRequestPolicy,
    CounterSet,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
)
from kubedevice.plugin.dra.backend.slices import SliceContentError, pool_content, standalone_slices
from kubedevice.plugin.dra.backend_api import PublishedDevice
from kubedevice.plugin.model import Device
from kubedevice.resource.slice_document import parse_slice
from kubedevice.resource.slice_rules import validate_pool, validate_slice_spec

DRIVER = "gpu.example.com"
ADDED = datetime(2026, 7, 24, 10, 0, 0, tzinfo=UTC)


def mig_pool(gpus: int, partitions: int) -> tuple[list[PublishedDevice], list[CounterSet]]:
    """The dra-example-driver's partitionable GPUs: a counter set per GPU, partitions and a full device."""
    devices, sets = [], []
    for g in range(gpus):
        name = f"gpu-{g}-counters"
        sets.append(CounterSet(name, {"memory": "80Gi", "compute": "100"}))
        share = {"memory": f"{80 // partitions}Gi", "compute": str(100 // partitions)}
        for p in range(partitions):
            consume = (DeviceCounterConsumption(name, share),)
            devices.append(
                PublishedDevice(f"gpu-{g}-partition-{p}", {"partition": p}, {}, consumes_counters=consume)
            )
        whole = (DeviceCounterConsumption(name, {"memory": "80Gi", "compute": "100"}),)
        devices.append(PublishedDevice(f"gpu-{g}-full", {"full": True}, {}, consumes_counters=whole))
    return devices, sets


def published(devices: list[PublishedDevice], sets: list[CounterSet] = []) -> list[dict[str, Any]]:  # noqa: B006
    content = pool_content(devices, sets)
    return standalone_slices(driver=DRIVER, node_name="node-1", generation=3, content=content)


def assert_accepted(documents: list[dict[str, Any]]) -> None:
    """Each slice as the API server validates it, the pool as upstream's controller checks it, each
    document in the shape of the client library's resource.k8s.io/v1 model, and read by the daemon with
    every feature it uses understood."""
    for doc in documents:
        assert validate_slice_spec(doc["spec"]) == [], doc["metadata"]["name"]
        ResourceSlice.from_dict(doc)
        assert doc["spec"]["pool"]["resourceSliceCount"] == len(documents)
        read = parse_slice(doc, "v1", "slices.yaml")
        assert read.unsupported is None and [d.unsupported for d in read.devices if d.unsupported] == []
        assert len(read.devices) == len(doc["spec"].get("devices", []))
    assert validate_pool("node-1", [d["spec"] for d in documents]) == []


def test_counter_sets_go_into_slices_of_their_own_before_the_devices() -> None:
    devices, sets = mig_pool(gpus=2, partitions=4)
    docs = published(devices, sets)
    assert_accepted(docs)
    assert [sorted(d["spec"]) for d in docs] == [
        ["driver", "nodeName", "pool", "sharedCounters"],
        ["devices", "driver", "nodeName", "pool"],
    ]
    assert docs[0]["spec"]["sharedCounters"][0] == {
        "name": "gpu-0-counters",
        "counters": {"compute": {"value": "100"}, "memory": {"value": "80Gi"}},
    }
    partition = next(d for d in docs[1]["spec"]["devices"] if d["name"] == "gpu-1-partition-3")
    assert partition["consumesCounters"] == [
        {
            "counterSet": "gpu-1-counters",
            "counters": {"compute": {"value": "25"}, "memory": {"value": "20Gi"}},
        }
    ]


def test_more_than_eight_counter_sets_take_more_slices() -> None:
    devices, sets = mig_pool(gpus=9, partitions=1)
    docs = published(devices, sets)
    assert_accepted(docs)
    assert [len(d["spec"].get("sharedCounters", [])) for d in docs] == [8, 1, 0]


def test_a_slice_with_taints_or_counters_holds_64_devices() -> None:
    plain = [PublishedDevice(f"a-{i:03}", {}, {}) for i in range(100)]
    tainted = [
        PublishedDevice(
            f"b-{i:03}", {}, {}, taints=(DeviceTaint("example.com/t", "NoSchedule", time_added=ADDED),)
        )
        for i in range(100)
    ]
    docs = published(plain + tainted)
    assert_accepted(docs)
    assert [len(d["spec"]["devices"]) for d in docs] == [100, 64, 36]
    devices, sets = mig_pool(gpus=1, partitions=70)
    assert [len(d["spec"].get("devices", [])) for d in published(devices, sets)] == [0, 64, 7]


def test_every_dra_field_is_written_as_the_api_has_it() -> None:
    memory = DeviceCapacity(
        "80Gi",
        CapacityRequestPolicy(default="8Gi", valid_range=CapacityRange(min="1Gi", max="80Gi", step="1Gi")),
    )
    device = PublishedDevice(
        "gpu-0",
        {},
        {"memory": memory, "compute": "100"},
        allow_multiple_allocations=True,
        taints=(DeviceTaint("example.com/unhealthy", "NoExecute", "xid-79", ADDED),),
        binding_conditions=("BindingConditions",),
        binding_failure_conditions=("BindingFailureConditions",),
        binds_to_node=True,
    )
    [doc] = published([device])
    assert_accepted([doc])
    entry = doc["spec"]["devices"][0]
    assert {k: v for k, v in entry.items() if k not in ("name", "attributes")} == {
        "capacity": {
            "compute": {"value": "100"},
            "memory": {
                "value": "80Gi",
                "requestPolicy": {
                    "default": "8Gi",
                    "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"},
                },
            },
        },
        "taints": [
            {
                "key": "example.com/unhealthy",
                "value": "xid-79",
                "effect": "NoExecute",
                "timeAdded": "2026-07-24T10:00:00Z",
            }
        ],
        "allowMultipleAllocations": True,
        "bindingConditions": ["BindingConditions"],
        "bindingFailureConditions": ["BindingFailureConditions"],
        "bindsToNode": True,
    }


@pytest.mark.parametrize(
    ("devices", "sets", "message"),
    [
        (
            [PublishedDevice("p", {}, {}, consumes_counters=(DeviceCounterConsumption("gone", {"m": "1"}),))],
            [],
            'counter set "gone" referenced by device "p" not found — return that counter set',
        ),
        (
            [PublishedDevice("p", {}, {}, consumes_counters=(DeviceCounterConsumption("s", {"x": "1"}),))],
            [CounterSet("s", {"m": "2"})],
            'counter "x" referenced by device "p" not found in counter set "s"',
        ),
        (
            [],
            [CounterSet("s", {"m": "2"}), CounterSet("s", {"m": "3"})],
            'found duplicate counter set "s" — give each counter set a distinct name',
        ),
    ],
)
def test_a_pool_that_does_not_hold_together_is_refused(
    devices: list[PublishedDevice], sets: list[CounterSet], message: str
) -> None:
    with pytest.raises(SliceContentError, match=re.escape(message)):
        pool_content(devices, sets)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: DeviceTaint("bad key!", "NoSchedule"),
            "taint bad key!:NoSchedule: taint.key: Invalid value",
        ),
        (
            lambda: DeviceTaint("k", "PreferNoSchedule"),  # type: ignore[arg-type]
            'taint.effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", '
            '"NoSchedule", "None"',
        ),
        (lambda: DeviceTaint("k", "NoSchedule", "v" * 64), "taint.value: Invalid value"),
        (lambda: DeviceTaint("k", "NoSchedule", time_added=datetime(2026, 1, 1)), "must carry a time zone"),
        (
            lambda: CounterSet("Not_A_Label", {"m": "1"}),
            "counter set Not_A_Label: counterSet.name: Invalid value",
        ),
        (lambda: CounterSet("s", {}), "counter set s: counterSet.counters: Required value"),
        (lambda: CounterSet("s", {"m": "lots"}), 'counterSet.counters[m].value: Invalid value: "lots"'),
        (
            lambda: CounterSet("s", {f"c{i}": "1" for i in range(33)}),
            "counterSet.counters: Too many: 33: must have at most 32 items",
        ),
        (lambda: DeviceCounterConsumption("s", {"M": "1"}), 'consumesCounters.counters: Invalid value: "M"'),
        (
            lambda: DeviceCapacity("8Gi", CapacityRequestPolicy(valid_values=("1Gi",))),
            "requestPolicy.default: Required value: required when validValues is defined",
        ),
        (
            lambda: DeviceCapacity("8Gi", CapacityRequestPolicy("2Gi", ("1Gi", "4Gi"))),
            'validValues: Invalid value: "2Gi": default value is not valid according to the requestPolicy',
        ),
        (
            lambda: DeviceCapacity(
                "8Gi", CapacityRequestPolicy("3Gi", valid_range=CapacityRange("2Gi", step="2Gi"))
            ),
            'validRange.step: Invalid value: "3Gi": value is not a multiple of a given step (2Gi) from (2Gi)',
        ),
        (
            lambda: DeviceCapacity(
                "8Gi", CapacityRequestPolicy("9Gi", valid_range=CapacityRange("1Gi", "9Gi"))
            ),
            'validRange.max: Invalid value: "9Gi": max is larger than capacity value',
        ),
        (
            lambda: Device(
                "g", capacity={"m": DeviceCapacity("8Gi", CapacityRequestPolicy("8Gi", ("8Gi",)))}
            ),
            "device 'g': capacity[m].requestPolicy: Forbidden: allowMultipleAllocations must be true",
        ),
        (
            lambda: Device("g", binding_conditions=("Attached",)),
            "device 'g': device.bindingFailureConditions: Invalid value: \"null\": "
            "bindingFailureConditions are required to use bindingConditions",
        ),
        (
            lambda: Device("g", binding_conditions=("A",), binding_failure_conditions=("A",)),
            "bindingFailureConditions must not overlap with bindingConditions",
        ),
        (
            lambda: Device(
                "g", consumes_counters=[DeviceCounterConsumption(f"s{i}", {"m": "1"}) for i in range(3)]
            ),
            "consumesCounters: Too many: 3: must have at most 2 items",
        ),
        (
            lambda: Device("g", taints=["example.com/t:NoSchedule"]),  # type: ignore[list-item]
            "device 'g': expected DeviceTaint objects, got 'example.com/t:NoSchedule'",
        ),
    ],
)
def test_the_sdk_types_refuse_what_the_api_server_would(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def spec(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": "node-1",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
    }
    return base | fields


def taint(**fields: Any) -> dict[str, Any]:
    return {"name": "d", "taints": [{"key": "k", "effect": "NoSchedule"} | fields]}


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        (
            spec(devices=[], sharedCounters=[{"name": "s", "counters": {"m": {"value": "1"}}}]),
            'spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed',
        ),
        (
            spec(devices=[{"name": f"d{i}", "taints": [{"key": "k", "effect": "None"}]} for i in range(65)]),
            "spec.devices: Too many: 65: must have at most 64 items",
        ),
        (
            spec(devices=[{"name": f"d{i}"} for i in range(129)]),
            "spec.devices: Too many: 129: must have at most 128",
        ),
        (
            spec(sharedCounters=[{"name": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(9)]),
            "spec.sharedCounters: Too many: 9: must have at most 8 items",
        ),
        (
            spec(sharedCounters=[{"name": "s", "counters": {"m": {"value": "1"}}}] * 2),
            'spec.sharedCounters[1]: Duplicate value: "s"',
        ),
        (spec(devices=[{"name": "d"}, {"name": "d"}]), 'spec.devices[1]: Duplicate value: "d"'),
        (spec(devices=[taint(effect="")]), "spec.devices[0].taints[0].effect: Required value"),
        (spec(devices=[taint(timeAdded="yesterday")]), 'taints[0].timeAdded: Invalid value: "yesterday"'),
        (
            spec(devices=[{"name": "d", "capacity": {"m": {"value": "1", "requestPolicy": {}}}}]),
            "spec.devices[0].capacity[m].requestPolicy: Forbidden: allowMultipleAllocations must be true",
        ),
        (
            spec(
                devices=[
                    {
                        "name": "d",
                        "allowMultipleAllocations": True,
                        "capacity": {
                            "m": {
                                "value": "4",
                                "requestPolicy": {
                                    "default": "1",
                                    "validValues": ["1"],
                                    "validRange": {"min": "1"},
                                },
                            }
                        },
                    }
                ]
            ),
            'requestPolicy: Forbidden: exactly one policy can be specified, cannot specify "validValues" and '
            '"validRange" at the same time',
        ),
        (
            spec(
                devices=[
                    {
                        "name": "d",
                        "consumesCounters": [
                            {"counterSet": "s", "counters": {"m": {"value": "1"}}},
                            {"counterSet": "s", "counters": {"m": {"value": "1"}}},
                        ],
                    }
                ]
            ),
            'spec.devices[0].consumesCounters[1]: Duplicate value: "s"',
        ),
        (
            spec(devices=[{"name": "d", "nodeName": "node-1"}]),
            'spec.devices[0]: Invalid value: "null": `nodeName`, `nodeSelector` and `allNodes` can only be '
            "set",
        ),
        (
            {**spec(devices=[{"name": "d"}]), "nodeName": None, "perDeviceNodeSelection": True},
            "spec.devices[0]: Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is "
            "required",
        ),
        ({**spec(devices=[]), "nodeName": None}, "spec: Required value: exactly one of `nodeName`"),
        ({**spec(devices=[]), "allNodes": True}, "but multiple fields are set"),
        (
            spec(devices=[], pool={"name": "node-1", "generation": -1, "resourceSliceCount": 0}),
            "must be greater",
        ),
        (
            spec(devices=[{"name": "d", "bindingConditions": [f"c{i}" for i in range(5)]}]),
            "spec.devices[0].bindingConditions: Too many: 5: must have at most 4 items",
        ),
        (
            spec(devices=[{"name": "d", "attributes": {"v": {"version": "1.2"}}}]),
            'spec.devices[0].attributes[v].version: Invalid value: "1.2": must be a string compatible with '
            "semver",
        ),
        (
            spec(devices=[{"name": "d", "attributes": {"v": {"int": 1, "bool": True}}}]),
            'spec.devices[0].attributes[v]: Invalid value: "": exactly one value must be specified',
        ),
    ],
)
def test_the_api_servers_slice_rules(given: dict[str, Any], refusal: str) -> None:
    assert any(refusal in str(e) for e in validate_slice_spec(given)), [
        str(e) for e in validate_slice_spec(given)
    ]


def test_a_valid_slice_of_each_kind_passes_the_rules() -> None:
    assert validate_slice_spec(spec(devices=[])) == []
    assert validate_slice_spec(spec(sharedCounters=[{"name": "s", "counters": {"m": {"value": "1"}}}])) == []
