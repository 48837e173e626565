"""Partitionable devices (shared counters, per-device node selection) and pools spanning nodes: upstream's
allocator test cases (`allocatortesting/allocator_testing.go`, `lexicographical_testing.go`), each named as
upstream names it, read from documents and allocated; expected results and errors as upstream's.

A case expecting `None` expects no allocation (upstream returns no result and no error; here the pod waits
with `cannot allocate all claims: ...`); a string is (part of) the error upstream returns.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.scheduler import CelSelectors, Unschedulable
from tests.scheduler_upstream_helpers import (
    ALL_NODES,
    CLAIM0,
    CLASS_A,
    CLASS_B,
    COUNTER_SET1,
    COUNTER_SET2,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    NODE2,
    PER_DEVICE,
    POOL1,
    POOL2,
    POOL3,
    REGION1,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUBREQ0,
    SUBREQ1,
    Case,
    allocate_documents,
    allocation,
    check_case,
    claim,
    consumption,
    counter_set,
    device,
    device_class,
    first_available,
    local_node_selector,
    memory_at_least,
    node_label_selector,
    request,
    resource_slice,
    result,
    sub_request,
)

LOCAL1 = local_node_selector(NODE1)
LOCAL2 = local_node_selector(NODE2)
CLASSES = [device_class(CLASS_A, DRIVER_A)]
INVALID = "invalid resource pools were encountered"


def mem(counter_set_name: str, amount: str) -> dict[str, Any]:
    return consumption(counter_set_name, {"memory": amount})


def counted(name: str, *consumes: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A device with capacity `fromCounters` (upstream's `device(name, fromCounters, nil)`)."""
    return device(name, *consumes, capacity_from_counters=True, **extra)


def three_partitions(capacity: str = "8Gi") -> list[dict[str, Any]]:
    """device-1 (4Gi), device-2 (6Gi), device-3 (4Gi) of one 8Gi counter set, in a pool of two slices."""
    return [
        resource_slice(
            SLICE1,
            NODE1,
            POOL1,
            DRIVER_A,
            counted(DEVICE1, mem(COUNTER_SET1, "4Gi")),
            counted(DEVICE2, mem(COUNTER_SET1, "6Gi")),
            counted(DEVICE3, mem(COUNTER_SET1, "4Gi")),
            count=2,
        ),
        resource_slice(
            SLICE2,
            NODE1,
            POOL1,
            DRIVER_A,
            count=2,
            counter_sets=[counter_set(COUNTER_SET1, {"memory": capacity})],
        ),
    ]


def by_memory(name: str, *subs: tuple[str, str]) -> dict[str, Any]:
    return first_available(
        name, *(sub_request(s, CLASS_A, selectors=[memory_at_least(DRIVER_A, q)]) for s, q in subs)
    )


def beside_an_allocated_one(allocated: str) -> dict[str, Any]:
    """device-1 (4Gi) wanted in an 18Gi counter set while device-2 (`allocated`) is allocated."""
    return {
        "documents": [
            claim(CLAIM0, request(REQ0, CLASS_A)),
            resource_slice(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                counted(DEVICE1, mem(COUNTER_SET1, "4Gi")),
                counted(DEVICE2, mem(COUNTER_SET1, allocated)),
                count=2,
            ),
            resource_slice(
                SLICE2,
                NODE1,
                POOL1,
                DRIVER_A,
                count=2,
                counter_sets=[counter_set(COUNTER_SET1, {"memory": "18Gi"})],
            ),
        ],
        "allocated": [(DRIVER_A, POOL1, DEVICE2)],
    }


def moving_pool(old: str, new: str, published: int) -> list[dict[str, Any]]:
    """A claim and a pool of two slices moving from node `old` (generation 1) to node `new` (generation 2,
    `published` of its two slices so far)."""
    return [
        claim(CLAIM0, request(REQ0, CLASS_A)),
        *(
            resource_slice(
                f"slice-{generation}{i}", node, POOL1, DRIVER_A, device(name), count=2, generation=generation
            )
            for generation, node, devices in ((1, old, 2), (2, new, published))
            for i, name in zip("ab", (DEVICE1, DEVICE2)[:devices], strict=False)
        ),
    ]


CASES: dict[str, Case] = {
    "all-devices-with-consumed-counters": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, all_devices=True)),
                resource_slice(
                    SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, mem(COUNTER_SET1, "4Gi")), count=2
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "8Gi"})],
                ),
            ]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "partitionable-devices-single-device": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(
                    SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, mem(COUNTER_SET1, "4Gi")), count=2
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "8Gi"})],
                ),
            ]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "partitionable-devices-prioritized-list": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A), by_memory(REQ1, (SUBREQ0, "6Gi"), (SUBREQ1, "4Gi"))),
                *three_partitions(),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1),
                result(f"{REQ1}/{SUBREQ1}", DRIVER_A, POOL1, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-multiple-devices": (
        lambda: {
            "documents": [claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A)), *three_partitions()]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1),
                result(REQ1, DRIVER_A, POOL1, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-multiple-capacity-pools": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A), by_memory(REQ1, (SUBREQ0, "6Gi"), (SUBREQ1, "4Gi"))),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE1, mem(COUNTER_SET1, "4Gi"), consumption(COUNTER_SET2, {"cpus": "4"})),
                    counted(DEVICE2, mem(COUNTER_SET1, "6Gi"), consumption(COUNTER_SET2, {"cpus": "6"})),
                    counted(DEVICE3, mem(COUNTER_SET1, "4Gi"), consumption(COUNTER_SET2, {"cpus": "4"})),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[
                        counter_set(COUNTER_SET1, {"memory": "18Gi"}),
                        counter_set(COUNTER_SET2, {"cpus": "8"}),
                    ],
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1),
                result(f"{REQ1}/{SUBREQ1}", DRIVER_A, POOL1, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-multiple-counters": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A)),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    counted(
                        DEVICE1,
                        consumption(COUNTER_SET1, {"memory": "4Gi", "cpus": "6"}),
                        consumption(COUNTER_SET2, {"cpus": "4", "memory": "2Gi"}),
                    ),
                    counted(
                        DEVICE2,
                        consumption(COUNTER_SET1, {"memory": "6Gi", "cpus": "4"}),
                        consumption(COUNTER_SET2, {"cpus": "6", "memory": "6Gi"}),
                    ),
                    counted(
                        DEVICE3,
                        consumption(COUNTER_SET1, {"memory": "4Gi", "cpus": "4"}),
                        consumption(COUNTER_SET2, {"cpus": "4", "memory": "4Gi"}),
                    ),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[
                        counter_set(COUNTER_SET1, {"cpus": "8", "memory": "18Gi"}),
                        counter_set(COUNTER_SET2, {"cpus": "12", "memory": "18Gi"}),
                    ],
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                result(REQ1, DRIVER_A, POOL1, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-multiple-pools": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A)),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE1, consumption(COUNTER_SET1, {"cpus": "6", "memory": "4Gi"})),
                    counted(DEVICE2, consumption(COUNTER_SET1, {"cpus": "4", "memory": "6Gi"})),
                    counted(DEVICE3, consumption(COUNTER_SET1, {"cpus": "4", "memory": "4Gi"})),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"cpus": "8", "memory": "18Gi"})],
                ),
                resource_slice(
                    SLICE3,
                    NODE1,
                    POOL2,
                    DRIVER_A,
                    counted(DEVICE1, consumption(COUNTER_SET1, {"cpus": "6", "memory": "4Gi"})),
                    counted(DEVICE2, consumption(COUNTER_SET1, {"cpus": "1", "memory": "7Gi"})),
                    counted(DEVICE3, consumption(COUNTER_SET1, {"cpus": "1", "memory": "7Gi"})),
                    count=2,
                ),
                resource_slice(
                    SLICE4,
                    NODE1,
                    POOL2,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"cpus": "8", "memory": "18Gi"})],
                ),
            ],
            "allocated": [(DRIVER_A, POOL1, DEVICE2), (DRIVER_A, POOL1, DEVICE3), (DRIVER_A, POOL2, DEVICE1)],
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL2, DEVICE2),
                result(REQ1, DRIVER_A, POOL2, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-unused-counters-in-counter-set": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, mem(COUNTER_SET1, "5Gi")),
                    device(DEVICE2, mem(COUNTER_SET1, "4Gi")),
                    device(DEVICE3, mem(COUNTER_SET1, "4Gi")),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "8Gi", "unused": "1Gi"})],
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                result(REQ0, DRIVER_A, POOL1, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    # Upstream's pool has two slices with resourceSliceCount 1 (its `pool1` helper): incomplete, so
    # nothing is allocated either way; here the pool is complete, so the counters are what stops it.
    "partitionable-devices-no-capacity-available": (lambda: beside_an_allocated_one("16Gi"), None),
    "partitionable-devices-overallocated-capacity-pool": (lambda: beside_an_allocated_one("20Gi"), None),
    "partitionable-devices-per-device-node-selection-nodename": (
        lambda: {
            "documents": [
                claim(CLAIM0, by_memory(REQ0, (SUBREQ0, "6Gi"), (SUBREQ1, "4Gi"))),
                resource_slice(
                    SLICE1,
                    PER_DEVICE,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE1, mem(COUNTER_SET1, "4Gi"), node=NODE1),
                    counted(DEVICE2, mem(COUNTER_SET1, "6Gi"), node=NODE2),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    PER_DEVICE,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "18Gi"})],
                ),
            ]
        },
        [allocation(result(f"{REQ0}/{SUBREQ1}", DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "partitionable-devices-per-device-node-selection-node-selector": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(
                    SLICE1,
                    PER_DEVICE,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE1, mem(COUNTER_SET1, "4Gi"), node=node_label_selector("region", REGION1)),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    PER_DEVICE,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "18Gi"})],
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=node_label_selector("region", REGION1)
            )
        ],
    ),
    "partitionable-devices-per-device-node-selection-node-selector-multiple-devices": (
        lambda: {
            "documents": [
                device_class(CLASS_B, DRIVER_B),
                claim(CLAIM0, request(REQ0, CLASS_A, 3), request(REQ1, CLASS_B, 3)),
                resource_slice(
                    SLICE1,
                    PER_DEVICE,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE1, mem(COUNTER_SET1, "4Gi"), node=node_label_selector("region", REGION1)),
                    counted(DEVICE2, mem(COUNTER_SET1, "4Gi"), node=NODE1),
                    counted(DEVICE3, mem(COUNTER_SET1, "4Gi"), node=ALL_NODES),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    PER_DEVICE,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "18Gi"})],
                ),
                resource_slice(
                    SLICE3,
                    NODE1,
                    POOL2,
                    DRIVER_B,
                    counted(DEVICE1, mem(COUNTER_SET2, "4Gi")),
                    counted(DEVICE2, mem(COUNTER_SET2, "4Gi")),
                    counted(DEVICE3, mem(COUNTER_SET2, "4Gi")),
                    count=2,
                ),
                resource_slice(
                    SLICE4,
                    NODE1,
                    POOL2,
                    DRIVER_B,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET2, {"memory": "12Gi"})],
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1),
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                result(REQ0, DRIVER_A, POOL1, DEVICE3),
                result(REQ1, DRIVER_B, POOL2, DEVICE1),
                result(REQ1, DRIVER_B, POOL2, DEVICE2),
                result(REQ1, DRIVER_B, POOL2, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-with-attribute-selector": (
        lambda: {
            "documents": [
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, 2),
                    request(REQ1, CLASS_A, selectors=[f'device.attributes["{DRIVER_A}"].special']),
                ),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    *(
                        device(
                            name,
                            consumption(COUNTER_SET1, {f"cpu{i}": "1"}),
                            consumption(COUNTER_SET2, {"mem": "10Gi"}),
                            attributes={"special": {"bool": i == 1}},
                        )
                        for i, name in ((1, DEVICE1), (2, DEVICE2), (3, DEVICE3))
                    ),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[
                        counter_set(COUNTER_SET1, {"cpu1": "1", "cpu2": "1", "cpu3": "1"}),
                        counter_set(COUNTER_SET2, {"mem": "30Gi"}),
                    ],
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                result(REQ0, DRIVER_A, POOL1, DEVICE3),
                result(REQ1, DRIVER_A, POOL1, DEVICE1),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-same-counter-set-name-in-different-resource-slices": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), count=4),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=4,
                    counter_sets=[counter_set(COUNTER_SET1, {"c": "1"})],
                ),
                resource_slice(SLICE3, NODE1, POOL1, DRIVER_A, device(DEVICE2), count=4),
                resource_slice(
                    SLICE4,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=4,
                    counter_sets=[counter_set(COUNTER_SET1, {"c": "1"})],
                ),
            ]
        },
        INVALID + f": {DRIVER_A}/{POOL1}: duplicate counter set name {COUNTER_SET1}",
    ),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-set": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, consumption(COUNTER_SET2, {"c": "1"})),
                    count=2,
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"c": "1"})],
                ),
            ]
        },
        INVALID + f": {DRIVER_A}/{POOL1}: counter set {COUNTER_SET2} not found",
    ),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(
                    SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, mem(COUNTER_SET1, "8Gi")), count=2
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=2,
                    counter_sets=[counter_set(COUNTER_SET1, {"other-memory": "8Gi"})],
                ),
            ]
        },
        INVALID + f": {DRIVER_A}/{POOL1}: counter memory not found in counter set {COUNTER_SET1}",
    ),
    "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, mem(COUNTER_SET1, "8Gi"))),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL2,
                    DRIVER_A,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "8Gi"})],
                ),
            ]
        },
        INVALID + f": {DRIVER_A}/{POOL1}: counter set {COUNTER_SET1} not found",
    ),
    "partitionable-devices-devices-on-different-nodes-consume-same-counter-set": (
        lambda: {
            "documents": [
                claim(CLAIM0, by_memory(REQ0, (SUBREQ0, "6Gi"), (SUBREQ1, "2Gi"))),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=3,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "8Gi"})],
                ),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE1, mem(COUNTER_SET1, "6Gi")),
                    counted(DEVICE2, mem(COUNTER_SET1, "2Gi")),
                    count=3,
                ),
                resource_slice(
                    SLICE3, NODE2, POOL1, DRIVER_A, device(DEVICE3, mem(COUNTER_SET1, "6Gi")), count=3
                ),
            ],
            "allocated": [(DRIVER_A, POOL1, DEVICE3)],
        },
        [allocation(result(f"{REQ0}/{SUBREQ1}", DRIVER_A, POOL1, DEVICE2), node_selector=LOCAL1)],
    ),
    "partitionable-devices-devices-consume-counter-set-in-different-nodes": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=3,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "8Gi"})],
                ),
                resource_slice(
                    SLICE2, NODE1, POOL1, DRIVER_A, counted(DEVICE1, mem(COUNTER_SET1, "6Gi")), count=3
                ),
                resource_slice(
                    SLICE3,
                    NODE2,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE2, mem(COUNTER_SET1, "6Gi")),
                    counted(DEVICE3, mem(COUNTER_SET1, "2Gi")),
                    count=3,
                ),
            ],
            "allocated": [(DRIVER_A, POOL1, DEVICE1)],
            "node": NODE2,
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE3), node_selector=LOCAL2)],
    ),
    "partitionable-devices-validation-error-on-non-targeting-slice": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=3,
                    counter_sets=[counter_set(COUNTER_SET1, {"memory": "8Gi"})],
                ),
                resource_slice(
                    SLICE2, NODE1, POOL1, DRIVER_A, counted(DEVICE1, mem(COUNTER_SET1, "6Gi")), count=3
                ),
                resource_slice(
                    SLICE3, NODE2, POOL1, DRIVER_A, device(DEVICE3, mem(COUNTER_SET2, "6Gi")), count=3
                ),
            ]
        },
        INVALID + f": {DRIVER_A}/{POOL1}: counter set {COUNTER_SET2} not found",
    ),
    # --- pools spanning nodes (upstream's GatherPools with all slices) ---
    "allocation-mode-all-with-multi-host-resource-pool": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, all_devices=True)),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), count=2),
                resource_slice(SLICE2, NODE2, POOL1, DRIVER_A, device(DEVICE2), count=2),
            ]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "multi-host-resource-pool-with-stale-slice-for-current-node": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), count=2, generation=1),
                resource_slice(SLICE2, NODE2, POOL1, DRIVER_A, device(DEVICE2), count=2, generation=2),
            ]
        },
        None,
    ),
    # Upstream gives the two slices of each node the same name; names are unique here (a second slice of
    # one name is refused), so each gets its own.
    "multi-host-resource-pool-complete-update-from-node-1-to-node-2": (
        lambda: {"documents": moving_pool(NODE1, NODE2, 2)},
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "multi-host-resource-pool-complete-update-from-node-2-to-node-1": (
        lambda: {"documents": moving_pool(NODE2, NODE1, 2)},
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2": (
        lambda: {"documents": moving_pool(NODE1, NODE2, 1)},
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1": (
        lambda: {"documents": moving_pool(NODE2, NODE1, 1)},
        None,
    ),
    "different-resourceslices-in-pool-can-target-different-nodes": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(SLICE1, NODE2, POOL1, DRIVER_A, device(DEVICE1), count=2),
                resource_slice(SLICE2, NODE1, POOL1, DRIVER_A, device(DEVICE2), count=2),
            ]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE2), node_selector=LOCAL1)],
    ),
    "no-allocation-from-incomplete-pools": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), count=2),
            ]
        },
        None,
    ),
    # --- lexicographical_testing.go: pools by ID, slices by name ---
    "lexicographical-sorting-pools": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                resource_slice(SLICE1, NODE1, POOL3, DRIVER_A, device(DEVICE1)),
                resource_slice(SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE1)),
                resource_slice(SLICE3, NODE1, POOL1, DRIVER_A, device(DEVICE1)),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1),
                result(REQ0, DRIVER_A, POOL2, DEVICE1),
                node_selector=LOCAL1,
            )
        ],
    ),
    "lexicographical-sorting-slices": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                resource_slice(SLICE3, NODE1, POOL1, DRIVER_A, device(DEVICE3), count=3),
                resource_slice(SLICE2, NODE1, POOL1, DRIVER_A, device(DEVICE2), count=3),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), count=3),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1),
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                node_selector=LOCAL1,
            )
        ],
    ),
}


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


@pytest.mark.parametrize("name", list(CASES))
def test_upstream_case(name: str, cel: CelSelectors) -> None:
    check_case(cel, CLASSES, CASES[name])


# --- a MIG-shaped pool: each GPU a full device, 3g and 1g partitions over the GPU's own counters ---


def mig_pool() -> list[dict[str, Any]]:
    def gpu(i: int) -> list[dict[str, Any]]:
        def part(name: str, kind: str, memory: str, slices: str) -> dict[str, Any]:
            uses = consumption(f"gpu-{i}", {"memory": memory, "slices": slices})
            return device(name, uses, attributes={"profile": {"string": kind}})

        return [
            part(f"gpu-{i}", "full", "40Gi", "7"),
            *(part(f"gpu-{i}-3g-{p}", "3g", "20Gi", "3") for p in range(2)),
            *(part(f"gpu-{i}-1g-{p}", "1g", "5Gi", "1") for p in range(7)),
        ]

    sets = [counter_set(f"gpu-{i}", {"memory": "40Gi", "slices": "7"}) for i in range(2)]
    return [
        resource_slice("mig-counters", NODE1, POOL1, DRIVER_A, count=2, counter_sets=sets),
        resource_slice("mig-devices", NODE1, POOL1, DRIVER_A, *gpu(0), *gpu(1), count=2),
    ]


def profile(name: str, profile_name: str) -> dict[str, Any]:
    return claim(
        name,
        request(REQ0, CLASS_A, selectors=[f'device.attributes["{DRIVER_A}"].profile == "{profile_name}"']),
    )


def test_mig_partitions_until_the_counters_run_out(cel: CelSelectors) -> None:
    taken: list[tuple[str, str, str]] = []
    while True:
        documents = [*CLASSES, *mig_pool(), profile(f"c{len(taken)}", "1g")]
        try:
            [allocated] = allocate_documents(cel, documents, allocated=taken)
        except Unschedulable as err:
            assert err.message.startswith("cannot allocate all claims")
            break
        taken.extend(allocated.device_ids())
    assert sorted(d for _, _, d in taken) == sorted(f"gpu-{i}-1g-{p}" for i in range(2) for p in range(7))


@pytest.mark.parametrize(
    ("in_use", "wanted", "expected"),
    [
        (["gpu-0-1g-0"], "full", "gpu-1"),  # never the full gpu-0 beside one of its partitions
        (["gpu-0-1g-0", "gpu-1-3g-1"], "full", None),
        (["gpu-0"], "1g", "gpu-1-1g-0"),  # nor a partition of a full GPU in use
        (["gpu-0"], "3g", "gpu-1-3g-0"),
        (["gpu-0-3g-0", "gpu-0-3g-1"], "1g", "gpu-1-1g-0"),  # one slice left on gpu-0, but no memory
    ],
)
def test_mig_never_a_full_gpu_beside_its_partitions(
    cel: CelSelectors, in_use: list[str], wanted: str, expected: str | None
) -> None:
    documents = [*CLASSES, *mig_pool(), profile("c", wanted)]
    allocated = [(DRIVER_A, POOL1, d) for d in in_use]
    if expected is None:
        with pytest.raises(Unschedulable):
            allocate_documents(cel, documents, allocated=allocated)
        return
    [result_] = allocate_documents(cel, documents, allocated=allocated)
    assert [r.device for r in result_.results] == [expected]


def test_the_explanation_counts_the_devices_whose_counters_are_used_up(cel: CelSelectors) -> None:
    """gpu-0 and gpu-1 taken whole: every partition's counters are used up (the "counters" rule), and
    the full GPUs are in use."""
    documents = [*CLASSES, *mig_pool(), profile("c", "1g")]
    with pytest.raises(Unschedulable) as caught:
        allocate_documents(cel, documents, allocated=[(DRIVER_A, POOL1, "gpu-0"), (DRIVER_A, POOL1, "gpu-1")])
    (one,) = caught.value.explanation
    assert [(r.rule, r.count, r.first, r.detail) for r in one.ruled_out] == [
        ("in use", 2, f"{DRIVER_A}/{POOL1}/gpu-0", "held by an allocated claim"),
        (
            "request selector",
            4,
            f"{DRIVER_A}/{POOL1}/gpu-0-3g-0",
            'device.attributes["driver-a"].profile == "1g"',
        ),
        ("counters", 14, f"{DRIVER_A}/{POOL1}/gpu-0-1g-0", "the shared counters it consumes are used up"),
    ]
