"""Builders for upstream's allocator test cases (`structured/internal/allocatortesting`), as documents.

Each builder makes the v1 document (a dict) upstream's helper of the same name makes as a Go object, so a
case reads like its upstream original; `allocate_documents` reads them with `read_document` (the API
server's checks included) and allocates them as the scheduler would for one node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from kubedevice.resource.documents import read_document
from kubedevice.resource.model import AllocationResult, DeviceID
from kubedevice.scheduler import AllocationRequest, CelSelectors, Unschedulable, allocate

NODE1 = "node-1"
NODE2 = "node-2"
REGION1 = "region-1"
CLASS_A = "class-a"
CLASS_B = "class-b"
DRIVER_A = "driver-a"
DRIVER_B = "driver-b"
POOL1, POOL2, POOL3 = "pool-1", "pool-2", "pool-3"
CLAIM0, CLAIM1 = "claim-0", "claim-1"
REQ0, REQ1 = "req-0", "req-1"
# upstream writes `subReq-0`, which the API server refuses (not a DNS label).
SUBREQ0, SUBREQ1 = "subreq-0", "subreq-1"
DEVICE0, DEVICE1, DEVICE2, DEVICE3 = "device-0", "device-1", "device-2", "device-3"
COUNTER_SET1, COUNTER_SET2 = "counter-set-1", "counter-set-2"
SLICE1, SLICE2, SLICE3, SLICE4 = "slice-1", "slice-2", "slice-3", "slice-4"
#: upstream's `node(node1, region1)`: its labels.
NODE_LABELS = {"region": REGION1, "planet": "earth"}
#: Node selection of a slice: every node, or per device.
ALL_NODES = "nodeSelectionAll"
PER_DEVICE = "nodeSelectionPerDevice"
V1 = "resource.k8s.io/v1"


def node_label_selector(key: str, *values: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]
    }


def local_node_selector(node: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }


def device_class(name: str, driver: str) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def consumption(counter_set: str, counters: Mapping[str, str]) -> dict[str, Any]:
    return {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}


def counter_set(name: str, counters: Mapping[str, str]) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}


def device(
    name: str,
    *consumes: dict[str, Any],
    capacity_from_counters: bool = False,
    attributes: Mapping[str, Any] | None = None,
    taints: Sequence[dict[str, Any]] = (),
    node: str | dict[str, Any] | None = None,
    binding: tuple[list[str], list[str]] | None = None,
    binds_to_node: bool = False,
) -> dict[str, Any]:
    """upstream's `device(...)` with its `with...` calls: counters consumed, `fromCounters` capacity,
    taints, node selection (a node name, ALL_NODES or a selector), binding conditions."""
    out: dict[str, Any] = {"name": name}
    if attributes:
        out["attributes"] = dict(attributes)
    if consumes:
        out["consumesCounters"] = list(consumes)
        if capacity_from_counters:
            out["capacity"] = {k: v for c in consumes for k, v in c["counters"].items()}
    if taints:
        out["taints"] = list(taints)
    if node == ALL_NODES:
        out["allNodes"] = True
    elif isinstance(node, str):
        out["nodeName"] = node
    elif node is not None:
        out["nodeSelector"] = node
    if binding is not None:
        out["bindingConditions"], out["bindingFailureConditions"] = binding
    if binds_to_node:
        out["bindsToNode"] = True
    return out


def resource_slice(
    name: str,
    node: str | dict[str, Any],
    pool: str,
    driver: str,
    *devices: dict[str, Any],
    count: int = 1,
    generation: int = 1,
    counter_sets: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """upstream's `sliceWithDevices` / `sliceWithCounterSets` (`resourcePool(pool, count)`)."""
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if node == ALL_NODES:
        spec["allNodes"] = True
    elif node == PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    elif isinstance(node, str):
        spec["nodeName"] = node
    else:
        spec["nodeSelector"] = node
    if devices:
        spec["devices"] = list(devices)
    if counter_sets:
        spec["sharedCounters"] = list(counter_sets)
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def taint(key: str, value: str, effect: str) -> dict[str, Any]:
    return {"key": key, "value": value, "effect": effect}


def toleration(operator: str, key: str, effect: str, value: str = "") -> dict[str, Any]:
    out = {"operator": operator, "key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def request(
    name: str,
    cls: str,
    count: int = 1,
    *,
    selectors: Sequence[str] = (),
    tolerations: Sequence[dict[str, Any]] = (),
    admin_access: bool = False,
    all_devices: bool = False,
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if all_devices:
        exactly["allocationMode"] = "All"
    else:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if tolerations:
        exactly["tolerations"] = list(tolerations)
    if admin_access:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def sub_request(
    name: str, cls: str, count: int = 1, *, selectors: Sequence[str] = (), tolerations: Sequence[Any] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "deviceClassName": cls, "count": count}
    if selectors:
        out["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if tolerations:
        out["tolerations"] = list(tolerations)
    return out


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def memory_at_least(driver: str, quantity: str) -> str:
    return f'device.capacity["{driver}"].memory.compareTo(quantity("{quantity}")) >= 0'


def allocate_documents(
    cel: CelSelectors,
    documents: Iterable[Mapping[str, Any]],
    *,
    node: str = NODE1,
    allocated: Iterable[DeviceID] = (),
    labels: Mapping[str, str] | None = None,
) -> list[AllocationResult]:
    """Reads every document (as the API server would check it) and allocates the claims for `node`."""
    read = [read_document(d, "case.yaml", cel) for d in documents]
    built = AllocationRequest.from_documents(
        read, node_name=node, in_use=allocated, node_labels=NODE_LABELS if labels is None else labels
    )
    return allocate(built, cel)


def result(
    req: str,
    driver: str,
    pool: str,
    dev: str,
    *,
    tolerations: Sequence[dict[str, Any]] = (),
    binding: tuple[list[str], list[str]] | None = None,
    admin_access: bool = False,
) -> dict[str, Any]:
    """One `status.allocation.devices.results[]` entry as the API server shows it (upstream's
    `deviceAllocationResult` / `deviceRequestAllocationResultWithBindingConditions`)."""
    out: dict[str, Any] = {"request": req, "driver": driver, "pool": pool, "device": dev}
    if admin_access:
        out["adminAccess"] = True
    if tolerations:
        out["tolerations"] = [{**t, "operator": t.get("operator") or "Equal"} for t in tolerations]
    if binding is not None and binding[0]:
        out["bindingConditions"], out["bindingFailureConditions"] = binding
    return out


def allocation(*results: dict[str, Any], node_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    """upstream's `allocationResult(selector, results...)` in the v1 JSON shape."""
    out: dict[str, Any] = {"devices": {"results": list(results)}}
    if node_selector is not None:
        out["nodeSelector"] = node_selector
    return out


#: One upstream case: its inputs (`documents` and allocate_documents' keywords), and what is expected:
#: the allocations' JSON, None for no allocation (upstream: no result, no error; here the pod waits with
#: `cannot allocate all claims: ...`), or the error's text.
Case = tuple[Callable[[], dict[str, Any]], Any]


def check_case(cel: CelSelectors, classes: Sequence[Mapping[str, Any]], case: Case) -> None:
    build, expected = case
    inputs = build()
    documents = [*classes, *inputs.pop("documents")]
    if expected is None or isinstance(expected, str):
        with pytest.raises(Unschedulable) as caught:
            allocate_documents(cel, documents, **inputs)
        message = caught.value.message
        assert message == expected if expected else message.startswith("cannot allocate all claims"), message
        return
    assert [a.to_json() for a in allocate_documents(cel, documents, **inputs)] == expected
