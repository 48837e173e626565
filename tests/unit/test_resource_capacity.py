"""Consumable capacity in the documents: requestPolicy checked as the API server checks it (upstream's
validation_device_capacity_test.go, cases by name), capacity.requests, consumedCapacity and shareID round
trips, allocated shares read from documents."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kubedevice.resource.claim_json import spec_json
from kubedevice.resource.documents import DocumentError, read_allocation, read_document
from kubedevice.resource.model import AllocationResult, ClaimDocument, DeviceRequestAllocationResult
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.slice_model import ResourceSliceDocument
from kubedevice.scheduler.allocated import AllocatedState
from kubedevice.scheduler.allocator import AllocationRequest, Unschedulable, allocate
from kubedevice.scheduler.cel import CelSelectors
from tests.dra_allocator_helpers import GPU, NODE

FIXED = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


def slice_with(capacity: dict[str, Any], shared_device: bool = True) -> dict[str, Any]:
    device: dict[str, Any] = {"name": "d", "capacity": {"memory": capacity}}
    if shared_device:
        device["allowMultipleAllocations"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": GPU,
            "nodeName": NODE,
            "pool": {"name": NODE, "resourceSliceCount": 1},
            "devices": [device],
        },
    }


def policy(value: str = "10Gi", **fields: Any) -> dict[str, Any]:
    return {"value": value, "requestPolicy": fields}


P = "ResourceSlice s: spec.devices[0].capacity[memory]"
# validation_device_capacity_test.go, by name (1Gi, 2Gi, a 10Gi capacity; 20Gi over it)
SLICE_REFUSED = {
    "request-policy-on-a-dedicated-device": (
        slice_with(policy(default="1Gi"), shared_device=False),
        f"{P}.requestPolicy: is allowed only when the device has allowMultipleAllocations: true",
    ),
    "policy-with-valid-values-without-default": (
        slice_with(policy(validValues=["1Gi"])),
        f"{P}.requestPolicy.default: is required when validValues is defined",
    ),
    "policy-with-valid-range-without-default": (
        slice_with(policy(validRange={"min": "1Gi"})),
        f"{P}.requestPolicy.default: is required when validRange is defined",
    ),
    "policy-with-valid-range-without-min": (
        slice_with(policy(default="1Gi", validRange={})),
        f"{P}.requestPolicy.validRange.min: is required when validRange is defined",
    ),
    "more-than-one-policy": (
        slice_with(policy(default="1Gi", validValues=["1Gi"], validRange={"min": "1Gi"})),
        f"{P}.requestPolicy: exactly one policy can be specified, cannot specify "
        '"validValues" and "validRange"',
    ),
    "invalid-options": (
        slice_with(policy(default="1Gi", validValues=["20Gi"])),
        f"{P}.requestPolicy.validValues[0]: 20Gi: option is larger than capacity value: 10Gi",
    ),
    "invalid-options-default-not-listed": (
        slice_with(policy(default="1Gi", validValues=["2Gi"])),
        f"{P}.requestPolicy.validValues: default value 1Gi is not valid according to the requestPolicy",
    ),
    "invalid-options-duplicate-normalized": (
        slice_with(policy(default="1Ki", validValues=["1Ki", "1024"])),
        f"{P}.requestPolicy.validValues[1]: duplicate value 1024",
    ),
    "invalid-options-duplicate-decimal-point": (
        slice_with(policy(default="1", validValues=["1", "1.0"])),
        f"{P}.requestPolicy.validValues[1]: duplicate value 1",
    ),
    "invalid-options-unsort": (
        slice_with(policy(default="1Gi", validValues=["2Gi", "1Gi"])),
        f"{P}.requestPolicy.validValues[1]: 1Gi: values must be sorted in ascending order",
    ),
    "too-many-options": (
        slice_with(policy(default="1", validValues=[str(i) for i in range(1, 12)])),
        f"{P}.requestPolicy.validValues: must have at most 10 items, has 11",
    ),
    "invalid-range-large-min-small-max": (
        slice_with(policy(default="2Gi", validRange={"min": "20Gi", "max": "1Gi"})),
        f"{P}.requestPolicy.validRange.min: 20Gi: min is larger than capacity value: 10Gi",
    ),
    "invalid-range-min-larger-than-max": (
        slice_with(policy(default="2Gi", validRange={"min": "2Gi", "max": "1Gi"})),
        f"{P}.requestPolicy.validRange.min: 2Gi: min is larger than max: 1Gi",
    ),
    "invalid-range-large-max": (
        slice_with(policy(default="1Gi", validRange={"min": "1Gi", "max": "20Gi"})),
        f"{P}.requestPolicy.validRange.max: 20Gi: max is larger than capacity value: 10Gi",
    ),
    "invalid-range-default-under-min": (
        slice_with(policy(default="1Gi", validRange={"min": "2Gi"})),
        f"{P}.requestPolicy.default: 1Gi: default is less than min: 2Gi",
    ),
    "invalid-range-multiple-of-step": (
        slice_with(policy(default="2Gi", validRange={"min": "1Gi", "max": "10Gi", "step": "2Gi"})),
        f"{P}.requestPolicy.validRange.step: 2Gi: value is not a multiple of a given step (2Gi) from (1Gi)",
    ),
    "range-step-zero": (
        slice_with(policy(default="1Gi", validRange={"min": "1Gi", "step": "0"})),
        f"{P}.requestPolicy.validRange.step: 0: must be greater than zero",
    ),
    "range-step-past-the-capacity": (
        slice_with(policy(default="1Gi", validRange={"min": "1Gi", "step": "10Gi"})),
        f"{P}.requestPolicy.validRange.step: 10Gi: one step 11Gi is larger than capacity value: 10Gi",
    ),
    "range-step-multiple-of-2^64": (
        slice_with(
            policy(
                "18446744073709551616", default="0", validRange={"min": "0", "step": "18446744073709551616"}
            )
        ),
        f"{P}.requestPolicy.validRange.step: 18446744073709551616: "
        "must not be larger than 9223372036854775807",
    ),
    "range-negative-min-with-step": (
        slice_with(policy(default="0", validRange={"min": "-1", "step": "1"})),
        f"{P}.requestPolicy.validRange.min: -1: must be greater than or equal to 0",
    ),
    "not-a-quantity": (
        slice_with(policy(default="lots")),
        f"{P}.requestPolicy.default: 'lots' is not a quantity",
    ),
}


@pytest.mark.parametrize("name", list(SLICE_REFUSED))
def test_request_policies_are_checked_as_the_api_server_does(name: str) -> None:
    doc, message = SLICE_REFUSED[name]
    with pytest.raises(DocumentError) as caught:
        read_document(doc)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    "capacity",
    [
        policy(),  # policy-without-default
        policy(default="1Gi"),  # default-without-policy
        policy(default="1Gi", validRange={"min": "1Gi", "max": "10Gi", "step": "1Gi"}),
        policy(default="1Gi", validValues=["1Gi", "10Gi"]),
        policy("9223372036854775807", default="0", validRange={"min": "0", "step": "9223372036854775807"}),
    ],
    ids=[
        "policy-without-default",
        "default-without-policy",
        "valid-range",
        "valid-two-options",
        "step-at-int64-max",
    ],
)
def test_valid_request_policies_are_read(capacity: dict[str, Any]) -> None:
    read = read_document(slice_with(capacity))
    assert isinstance(read, ResourceSliceDocument)
    [device] = read.devices
    assert device.allow_multiple_allocations and str(device.capacity["memory"].value) == capacity["value"]


def claim_with(capacity: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "devices": {
                "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "capacity": capacity}}]
            }
        },
    }


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        ({"requests": {"memory": "-1Gi"}}, "requests[memory]: -1Gi: must not be negative"),
        ({"requests": {"memory": "lots"}}, "requests[memory]: 'lots' is not a quantity"),
        ({"requests": {"bad name": "1"}}, "requests[bad name]: is not a capacity name"),
        ({"requests": ["memory"]}, "requests: must be a mapping, not a list"),
    ],
)
def test_capacity_requests_are_checked(capacity: Any, message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        read_document(claim_with(capacity))
    assert str(caught.value).startswith(
        f"ResourceClaim ns/c: spec.devices.requests[0].exactly.capacity.{message}"
    )


def test_capacity_requests_are_printed_and_read_back() -> None:
    read = read_document(claim_with({"requests": {"memory": "1.5Gi", "example.com/bw": 10}}))
    assert isinstance(read, ClaimDocument)
    printed = spec_json(read.spec)["devices"]["requests"][0]["exactly"]["capacity"]
    assert printed == {"requests": {"example.com/bw": "10", "memory": "1536Mi"}}
    again = read_document(claim_with(printed))
    assert isinstance(again, ClaimDocument) and again.spec == read.spec


def test_consumed_capacity_and_share_ids_round_trip() -> None:
    result = DeviceRequestAllocationResult(
        "r", GPU, NODE, "d", share_id=FIXED, consumed_capacity={"memory": Quantity.parse("10240Mi")}
    )
    shown_json = AllocationResult((result,), node_name=NODE).to_json()
    assert shown_json["devices"]["results"][0] == {
        "request": "r",
        "driver": GPU,
        "pool": NODE,
        "device": "d",
        "shareID": FIXED,
        "consumedCapacity": {"memory": "10Gi"},
    }
    back = read_allocation(shown_json, "claim ns/c: ")
    assert back is not None and back.results == (result,)
    with pytest.raises(DocumentError, match=r"consumedCapacity\[memory\]: 'x' is not a quantity"):
        read_allocation(
            {
                "devices": {
                    "results": [{**shown_json["devices"]["results"][0], "consumedCapacity": {"memory": "x"}}]
                }
            },
            "",
        )


def test_allocated_claims_share_devices_by_share_id() -> None:
    def result(device: str, share: str | None = None, admin: bool | None = None, **consumed: str) -> Any:
        amounts = {k: Quantity.parse(v) for k, v in consumed.items()} or None
        return DeviceRequestAllocationResult("r", GPU, NODE, device, admin, share, amounts)

    allocations = [
        AllocationResult((result("a"), result("s", FIXED, memory="1Gi"))),
        AllocationResult(
            (result("s", "bbbbbbbb-aaaa-aaaa-aaaa-aaaaaaaaaaaa", memory="2Gi"), result("t", FIXED))
        ),
        AllocationResult((result("b", admin=True), result("s", FIXED, admin=True, memory="4Gi"))),
    ]
    state = AllocatedState.gather(allocations, [(GPU, NODE, "x")])
    assert state.in_use == {(GPU, NODE, "a"), (GPU, NODE, "x")}
    assert state.consumed_capacity == {
        (GPU, NODE, "s"): {"memory": Quantity.parse("3Gi")},
        (GPU, NODE, "t"): {},
    }


MEMORY_SHARE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    allowMultipleAllocations: true
    capacity:
      memory:
        value: 40Gi
        requestPolicy: {default: 10Gi, validRange: {min: 10Gi, max: 40Gi, step: 10Gi}}
"""


def test_documents_to_shares_as_the_demo_does(cel: CelSelectors) -> None:
    def wanting(name: str, memory: str | None, allocation: dict[str, Any] | None = None) -> dict[str, Any]:
        doc = claim_with({"requests": {"memory": memory}} if memory else None)
        doc["metadata"]["name"] = name
        doc["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu"
        if allocation:
            doc["status"] = {"allocation": allocation}
        return doc

    gpu_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {},
    }
    held = AllocationResult(
        (
            DeviceRequestAllocationResult(
                "r", GPU, NODE, "gpu-0", None, FIXED, {"memory": Quantity.parse("20Gi")}
            ),
        )
    )
    documents = [
        read_document(yaml.safe_load(MEMORY_SHARE)),
        read_document(gpu_class),
        read_document(wanting("held", None, held.to_json())),
        read_document(wanting("small", "15Gi")),
    ]
    built = AllocationRequest.from_documents(documents, NODE)
    assert built.consumed_capacity == {(GPU, NODE, "gpu-0"): {"memory": Quantity.parse("20Gi")}}
    [allocation] = allocate(built, cel, share_ids=lambda: FIXED)
    assert allocation.to_json()["devices"]["results"][0]["consumedCapacity"] == {
        "memory": "20Gi"
    }  # 15Gi stepped up
    full = AllocationRequest.from_documents([*documents[:3], read_document(wanting("big", "30Gi"))], NODE)
    with pytest.raises(Unschedulable, match='request "r": 1 matching device\\(s\\) wanted, 0 free'):
        allocate(full, cel)
