"""The newer device fields as documents: shared counters and their consumption, per-device node selection,
taints, binding conditions, tolerations and DeviceTaintRule documents read and checked as the API server
checks them (each refusal naming the field), quantities exact, and the allocation's new fields round-trip
through `to_json` and the reader of `status.allocation`."""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.resource.claim_json import spec_json
from kubedevice.resource.documents import read_allocation, read_document
from kubedevice.resource.fields import DocumentError
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    DeviceRequestAllocationResult,
    DeviceTaintRuleDocument,
)
from kubedevice.resource.node_selector import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from kubedevice.resource.quantity import quantity_nanos
from kubedevice.resource.slice_model import ResourceSliceDocument
from kubedevice.resource.taints import DeviceTaint, DeviceToleration

V1 = "resource.k8s.io/v1"


def slice_doc(devices: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": "gpu.example.com",
        "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
        **({"nodeName": "node-1"} if "perDeviceNodeSelection" not in spec and "allNodes" not in spec else {}),
        **spec,
    }
    if devices is not None:
        body["devices"] = devices
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": body}


def read_slice(doc: dict[str, Any]) -> ResourceSliceDocument:
    out = read_document(doc, "s.yaml")
    assert isinstance(out, ResourceSliceDocument)
    return out


def claim_doc(exactly: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", **exactly}}]}
        },
        **({"status": status} if status else {}),
    }


def counters(**values: str) -> dict[str, Any]:
    return {k: {"value": v} for k, v in values.items()}


def test_counter_sets_and_consumption_are_read_exactly() -> None:
    s = read_slice(
        slice_doc(
            [
                {
                    "name": "mig-1g",
                    "consumesCounters": [{"counterSet": "gpu-0", "counters": counters(memory="5Gi")}],
                }
            ],
            sharedCounters=[{"name": "gpu-0", "counters": counters(memory="40Gi", slices="7", power="0.1n")}],
        )
    )
    [counter_set] = s.shared_counters
    assert {k: c.nanos for k, c in counter_set.counters.items()} == {
        "memory": 40 * 2**30 * 10**9,
        "slices": 7 * 10**9,
        "power": 1,  # finer than a nano-unit: rounded up, as apimachinery does
    }
    [consumption] = s.devices[0].consumes_counters
    assert consumption.counter_set == "gpu-0" and consumption.counters["memory"].text == "5Gi"


@pytest.mark.parametrize(
    ("text", "nanos"),
    [("1", 10**9), ("500m", 5 * 10**8), ("1.5Gi", 3 * 2**29 * 10**9), ("-2", -2 * 10**9), ("1e-12", 1)],
)
def test_quantities_in_nano_units(text: str, nanos: int) -> None:
    assert quantity_nanos(text) == nanos


def test_a_binary_quantity_is_capped_and_a_larger_decimal_one_refused() -> None:
    assert quantity_nanos("16Ei") == (2**63 - 1) * 10**9
    with pytest.raises(ValueError, match="too large"):
        quantity_nanos("1e19")


def test_per_device_node_selection_and_binding_fields_are_read() -> None:
    s = read_slice(
        slice_doc(
            [
                {"name": "a", "nodeName": "node-2"},
                {"name": "b", "allNodes": True, "bindsToNode": True},
                {
                    "name": "c",
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["1"]}]}
                        ]
                    },
                    "bindingConditions": ["example.com/attached"],
                    "bindingFailureConditions": ["example.com/failed"],
                    "taints": [
                        {"key": "example.com/hot", "effect": "NoExecute", "timeAdded": "2025-01-02T03:04:05Z"}
                    ],
                },
            ],
            perDeviceNodeSelection=True,
        )
    )
    a, b, c = s.devices
    assert s.per_device_node_selection
    assert a.serves("node-2", {}) and not a.serves("node-1", {})
    assert b.serves("anywhere", {}) and b.binds_to_node
    assert c.serves("n", {"rack": "1"}) and not c.serves("n", {"rack": "2"})
    assert c.binding_conditions == ("example.com/attached",)
    assert c.taints == (DeviceTaint("example.com/hot", "NoExecute", "", "2025-01-02T03:04:05Z"),)


def test_counter_sets_beside_devices_the_older_form_are_read_too() -> None:
    s = read_slice(
        slice_doc(
            [{"name": "a", "consumesCounters": [{"counterSet": "cs", "counters": counters(c="1")}]}],
            sharedCounters=[{"name": "cs", "counters": counters(c="2")}],
        )
    )
    assert [c.name for c in s.shared_counters] == ["cs"] and [d.name for d in s.devices] == ["a"]


MANY = [{"name": f"d{i}"} for i in range(65)]
BAD_SLICES: list[tuple[dict[str, Any], str]] = [
    (
        slice_doc(sharedCounters=[{"name": f"s{i}", "counters": counters(c="1")} for i in range(9)]),
        "spec.sharedCounters: must have at most 8 items, has 9",
    ),
    (
        slice_doc(
            sharedCounters=[
                {"name": "s", "counters": counters(c="1")},
                {"name": "s", "counters": counters(c="1")},
            ]
        ),
        "spec.sharedCounters[1].name: 's' is used by another counter set",
    ),
    (
        slice_doc(sharedCounters=[{"name": "s"}]),
        "spec.sharedCounters[0].counters: is required (at least one counter)",
    ),
    (
        slice_doc(sharedCounters=[{"name": "s", "counters": counters(**{f"c{i}": "1" for i in range(33)})}]),
        "spec.sharedCounters[0].counters: must have at most 32 counters, has 33",
    ),
    (
        slice_doc(sharedCounters=[{"name": "s", "counters": counters(Memory="1")}]),
        "spec.sharedCounters[0].counters[Memory]: is not a DNS label",
    ),
    (
        slice_doc(sharedCounters=[{"name": "s", "counters": counters(c="lots")}]),
        "spec.sharedCounters[0].counters[c].value: 'lots' is not a quantity",
    ),
    (
        slice_doc(sharedCounters=[{"name": "s", "counters": counters(c="1e20")}]),
        "spec.sharedCounters[0].counters[c].value: '1e20' is too large (at most 2^63-1)",
    ),
    (
        slice_doc(
            [
                {
                    "name": "a",
                    "consumesCounters": [
                        {"counterSet": f"s{i}", "counters": counters(c="1")} for i in range(3)
                    ],
                }
            ]
        ),
        "spec.devices[0].consumesCounters: must have at most 2 items, has 3",
    ),
    (
        slice_doc(
            [{"name": "a", "consumesCounters": [{"counterSet": "s", "counters": counters(c="1")}] * 2}]
        ),
        "spec.devices[0].consumesCounters[1].counterSet: 's' is named by another entry",
    ),
    (
        slice_doc([{**d, "taints": [{"key": "k", "effect": "NoSchedule"}]} for d in MANY]),
        "spec.devices: must have at most 64 items when a device has taints, consumes counters or has list "
        "attributes, has 65",
    ),
    (
        slice_doc([{"name": "a", "taints": [{"key": "k", "effect": "NoSchedule"}] * 17}]),
        "spec.devices[0].taints: must have at most 16 items, has 17",
    ),
    (
        slice_doc([{"name": "a", "taints": [{"effect": "NoSchedule"}]}]),
        "spec.devices[0].taints[0].key: is required",
    ),
    (slice_doc([{"name": "a", "taints": [{"key": "k"}]}]), "spec.devices[0].taints[0].effect: is required"),
    (
        slice_doc([{"name": "a", "taints": [{"key": "k", "effect": "PreferNoSchedule"}]}]),
        "spec.devices[0].taints[0].effect: Unsupported value: 'PreferNoSchedule': supported values: "
        '"NoExecute", "NoSchedule", "None"',
    ),
    (
        slice_doc([{"name": "a", "taints": [{"key": "bad key", "effect": "None"}]}]),
        "spec.devices[0].taints[0].key: 'bad key' is not a label key",
    ),
    (
        slice_doc([{"name": "a", "taints": [{"key": "k", "value": "-x", "effect": "None"}]}]),
        "spec.devices[0].taints[0].value: '-x' is not a label value",
    ),
    (
        slice_doc([{"name": "a", "taints": [{"key": "k", "effect": "None", "timeAdded": "yesterday"}]}]),
        "spec.devices[0].taints[0].timeAdded: 'yesterday' is not an RFC 3339 time",
    ),
    (
        slice_doc([{"name": "a", "nodeName": "node-1"}]),
        "spec.devices[0]: `nodeName`, `nodeSelector` and `allNodes` can only be set if "
        "`perDeviceNodeSelection` "
        "is set to true in the ResourceSlice spec",
    ),
    (
        slice_doc([{"name": "a"}], perDeviceNodeSelection=True),
        "spec.devices[0]: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
    ),
    (
        slice_doc([{"name": "a", "nodeName": "n", "allNodes": True}], perDeviceNodeSelection=True),
        "spec.devices[0]: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required",
    ),
    (
        slice_doc([{"name": "a", "allNodes": False}], perDeviceNodeSelection=True),
        "spec.devices[0].allNodes: must be either unset or set to true",
    ),
    (
        slice_doc([{"name": "a", "nodeSelector": {"nodeSelectorTerms": []}}], perDeviceNodeSelection=True),
        "spec.devices[0].nodeSelector.nodeSelectorTerms: must have exactly one term, not 0",
    ),
    (
        slice_doc(
            [
                {
                    "name": "a",
                    "bindingConditions": [f"c{i}" for i in range(5)],
                    "bindingFailureConditions": ["f"],
                }
            ]
        ),
        "spec.devices[0].bindingConditions: must have at most 4 items, has 5",
    ),
    (
        slice_doc([{"name": "a", "bindingConditions": ["ready"]}]),
        "spec.devices[0].bindingFailureConditions: "
        "bindingFailureConditions are required to use bindingConditions",
    ),
    (
        slice_doc([{"name": "a", "bindingFailureConditions": ["failed"]}]),
        "spec.devices[0].bindingConditions: bindingConditions are required to use bindingFailureConditions",
    ),
    (
        slice_doc([{"name": "a", "bindingConditions": ["x", "x"], "bindingFailureConditions": ["f"]}]),
        "spec.devices[0].bindingConditions[1]: Duplicate value: 'x'",
    ),
    (
        slice_doc([{"name": "a", "bindingConditions": ["x"], "bindingFailureConditions": ["x"]}]),
        "spec.devices[0].bindingFailureConditions[0]: "
        "bindingFailureConditions must not overlap with bindingConditions",
    ),
    (
        slice_doc([{"name": "a", "bindingConditions": ["not a name"], "bindingFailureConditions": ["f"]}]),
        "spec.devices[0].bindingConditions[0]: 'not a name' is not a condition type",
    ),
]


@pytest.mark.parametrize(
    ("doc", "message"), BAD_SLICES, ids=[m.split(":")[0] + f"-{i}" for i, (_, m) in enumerate(BAD_SLICES)]
)
def test_a_bad_slice_field_is_refused_naming_it(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        read_document(doc, "s.yaml")
    assert str(caught.value).startswith(f"ResourceSlice s: {message}"), str(caught.value)


def test_tolerations_are_read_defaulted_and_printed_back() -> None:
    doc = claim_doc(
        {
            "tolerations": [
                {"key": "example.com/k", "value": "v"},
                {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            ]
        }
    )
    claim = read_document(doc, "c.yaml")
    assert isinstance(claim, ClaimDocument)
    exact = claim.spec.requests[0].exactly
    assert exact is not None
    assert exact.tolerations == (
        DeviceToleration("example.com/k", "Equal", "v"),
        DeviceToleration("", "Exists", "", "NoExecute", 30),
    )
    assert spec_json(claim.spec)["devices"]["requests"][0]["exactly"]["tolerations"] == [
        {"key": "example.com/k", "operator": "Equal", "value": "v"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ]


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        (
            {"key": "k", "operator": "Exists", "value": "v"},
            "tolerations[0].value: must be empty for operator `Exists`",
        ),
        (
            {"key": "k", "operator": "Gt"},
            'tolerations[0].operator: Unsupported value: \'Gt\': supported values: "Equal", "Exists"',
        ),
        (
            {"key": "k", "effect": "PreferNoSchedule"},
            "tolerations[0].effect: Unsupported value: 'PreferNoSchedule'",
        ),
        ({"key": "a/b/c"}, "tolerations[0].key: 'a/b/c' is not a label key"),
        ({"key": "k", "value": "x" * 64}, "tolerations[0].value:"),
        ({"key": "k", "tolerationSeconds": "soon"}, "tolerations[0].tolerationSeconds: must be an integer"),
    ],
)
def test_a_bad_toleration_is_refused_naming_it(toleration: dict[str, Any], message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        read_document(claim_doc({"tolerations": [toleration]}), "c.yaml")
    assert str(caught.value).startswith(
        f"ResourceClaim default/c: spec.devices.requests[0].exactly.{message}"
    )


def test_more_than_16_tolerations_are_refused() -> None:
    with pytest.raises(DocumentError, match=r"exactly.tolerations: must have at most 16 items, has 17"):
        read_document(claim_doc({"tolerations": [{"operator": "Exists"}] * 17}), "c.yaml")


def rule_doc(spec: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": spec,
    }


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1alpha3"])
def test_a_device_taint_rule_is_read_in_each_version(version: str) -> None:
    doc = rule_doc(
        {
            "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1/a", "device": "gpu-0"},
            "taint": {"key": "k", "effect": "NoExecute"},
        },
        version,
    )
    rule = read_document(doc, "r.yaml")
    assert isinstance(rule, DeviceTaintRuleDocument) and rule.meta.key == "r"
    assert rule.taint == DeviceTaint("k", "NoExecute")
    assert rule.selector is not None and rule.selector.matches("gpu.example.com", "node-1/a", "gpu-0")
    assert not rule.selector.matches("gpu.example.com", "node-1/a", "gpu-1")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (rule_doc({}), "DeviceTaintRule r: spec.taint: is required"),
        (
            rule_doc({"taint": {"key": "k", "effect": "Evict"}}),
            "DeviceTaintRule r: spec.taint.effect: Unsupported value: 'Evict'",
        ),
        (
            rule_doc({"deviceSelector": {"deviceClassName": "gpu"}, "taint": {"key": "k", "effect": "None"}}),
            "DeviceTaintRule r: spec.deviceSelector.deviceClassName: "
            "is no longer supported (removed in Kubernetes 1.35)",
        ),
        (
            rule_doc({"deviceSelector": {"driver": "Bad_Driver"}, "taint": {"key": "k", "effect": "None"}}),
            "DeviceTaintRule r: spec.deviceSelector.driver: 'Bad_Driver' is not a valid name",
        ),
        (
            rule_doc({"deviceSelector": {"pool": "a//b"}, "taint": {"key": "k", "effect": "None"}}),
            "DeviceTaintRule r: spec.deviceSelector.pool: 'a//b' is not a pool name",
        ),
        (
            rule_doc({"taint": {"key": "k", "effect": "None"}}, "v1beta1"),
            'kind DeviceTaintRule: apiVersion "resource.k8s.io/v1beta1" is not supported '
            "(use resource.k8s.io/v1, v1beta2 or v1alpha3)",
        ),
    ],
)
def test_a_bad_device_taint_rule_is_refused_naming_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        read_document(doc, "r.yaml")
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_new_result_fields_round_trip_through_status_allocation() -> None:
    selector = NodeSelector(
        (NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("rack", "In", ("1",)),)),)
    )
    allocation = AllocationResult(
        (
            DeviceRequestAllocationResult(
                "gpu",
                "gpu.example.com",
                "p",
                "gpu-0",
                tolerations=(DeviceToleration("k", "Exists", effect="NoSchedule", toleration_seconds=5),),
                binding_conditions=("example.com/attached",),
                binding_failure_conditions=("example.com/failed",),
            ),
        ),
        node_selector=selector,
    )
    written = allocation.to_json()
    assert written["devices"]["results"][0] == {
        "request": "gpu",
        "driver": "gpu.example.com",
        "pool": "p",
        "device": "gpu-0",
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}],
        "bindingConditions": ["example.com/attached"],
        "bindingFailureConditions": ["example.com/failed"],
    }
    assert written["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["1"]}]}]
    }
    assert read_allocation(written, "claim: ") == allocation
    local = AllocationResult(allocation.results, node_name="node-1")
    assert read_allocation(local.to_json(), "claim: ") == local
    anywhere = AllocationResult(allocation.results)
    assert (
        "nodeSelector" not in anywhere.to_json()
        and read_allocation(anywhere.to_json(), "claim: ") == anywhere
    )


def test_a_user_written_allocation_with_the_new_fields_is_read() -> None:
    status = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.example.com",
                        "pool": "p",
                        "device": "gpu-0",
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                        "bindingConditions": ["ready"],
                        "bindingFailureConditions": ["failed"],
                    }
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                ]
            },
        }
    }
    claim = read_document(claim_doc({}, status), "c.yaml")
    assert isinstance(claim, ClaimDocument) and claim.allocation is not None
    assert claim.allocation.node_name == "node-1" and claim.allocation.node_selector is None
    [r] = claim.allocation.results
    assert r.tolerations == (DeviceToleration("k", "Exists"),) and r.binding_conditions == ("ready",)


def test_an_allocations_timestamp_is_read_back_and_a_bad_one_refused() -> None:
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"}
    stamped = {"devices": {"results": [result]}, "allocationTimestamp": "2026-07-24T10:00:00Z"}
    allocation = read_allocation(stamped, "claim: ")
    assert allocation is not None and allocation.allocation_timestamp == "2026-07-24T10:00:00Z"
    assert allocation.to_json() == stamped
    with pytest.raises(DocumentError) as refused:
        read_document(
            claim_doc({}, {"allocation": {**stamped, "allocationTimestamp": "yesterday"}}), "c.yaml"
        )
    assert "status.allocation.allocationTimestamp: 'yesterday' is not an RFC 3339 time" in str(refused.value)
