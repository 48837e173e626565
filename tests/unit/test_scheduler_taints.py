"""Device taints and tolerations (with DeviceTaintRule documents) and binding conditions: upstream's
allocator test cases (`allocatortesting/allocator_testing.go`, `lexicographical_testing.go`), each named as
upstream names it, read from documents and allocated; then upstream's `ToleratesTaint` table and the
pod's message naming the taint. Cases for a feature switched off upstream have no counterpart here.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.resource.taints import DeviceTaint, DeviceToleration, tolerates
from kubedevice.scheduler import CelSelectors, Unschedulable
from tests.scheduler_upstream_helpers import (
    CLAIM0,
    CLASS_A,
    CLASS_B,
    COUNTER_SET1,
    DEVICE1,
    DEVICE2,
    DEVICE3,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    POOL1,
    POOL2,
    POOL3,
    REQ0,
    REQ1,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUBREQ0,
    SUBREQ1,
    V1,
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
    node_label_selector,
    request,
    resource_slice,
    result,
    sub_request,
    taint,
    toleration,
)

LOCAL1 = local_node_selector(NODE1)
CLASSES = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
KEY, VALUE, VALUE2 = "taint-key", "taint-value", "taint-value-2"
TAINT_NONE = taint(KEY, VALUE, "None")
TAINT_NO_SCHEDULE = taint(KEY, VALUE, "NoSchedule")
TAINT_NO_EXECUTE = taint(KEY, VALUE2, "NoExecute")
TOLERATION_NO_SCHEDULE = toleration("Exists", KEY, "NoSchedule")
TOLERATION_NO_EXECUTE = toleration("Equal", KEY, "NoExecute", VALUE2)
TOLERATION_NO_SCHEDULE_KEY1 = toleration("Exists", "key1", "NoSchedule")
BINDING = (["IsPrepare"], ["BindingFailed"])


def one_slice(*devices: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, *devices, **extra)


def mem(amount: str) -> dict[str, Any]:
    return consumption(COUNTER_SET1, {"memory": amount})


def counters(name: str, amount: str, **extra: Any) -> dict[str, Any]:
    return resource_slice(
        name, NODE1, POOL1, DRIVER_A, counter_sets=[counter_set(COUNTER_SET1, {"memory": amount})], **extra
    )


CASES: dict[str, Case] = {
    "tainted-two-devices": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                one_slice(
                    device(DEVICE1, taints=[TAINT_NO_SCHEDULE]), device(DEVICE2, taints=[TAINT_NO_EXECUTE])
                ),
            ]
        },
        None,
    ),
    "tainted-one-device-two-taints": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                one_slice(device(DEVICE1, taints=[TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE])),
            ]
        },
        None,
    ),
    "tainted-two-devices-tolerated": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, tolerations=[TOLERATION_NO_EXECUTE])),
                one_slice(
                    device(DEVICE1, taints=[TAINT_NO_SCHEDULE]), device(DEVICE2, taints=[TAINT_NO_EXECUTE])
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE2, tolerations=[TOLERATION_NO_EXECUTE]),
                node_selector=LOCAL1,
            )
        ],
    ),
    "tainted-two-devices-prioritized-list-tolerated": (
        lambda: {
            "documents": [
                claim(
                    CLAIM0,
                    first_available(
                        REQ0,
                        sub_request(SUBREQ0, CLASS_A),
                        sub_request(SUBREQ1, CLASS_A, tolerations=[TOLERATION_NO_EXECUTE]),
                    ),
                ),
                one_slice(
                    device(DEVICE1, taints=[TAINT_NO_SCHEDULE]), device(DEVICE2, taints=[TAINT_NO_EXECUTE])
                ),
            ]
        },
        [
            allocation(
                result(f"{REQ0}/{SUBREQ1}", DRIVER_A, POOL1, DEVICE2, tolerations=[TOLERATION_NO_EXECUTE]),
                node_selector=LOCAL1,
            )
        ],
    ),
    "tainted-no-effect": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                one_slice(device(DEVICE1, taints=[TAINT_NONE])),
            ]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "tainted-one-device-two-taints-both-tolerated": (
        lambda: {
            "documents": [
                claim(
                    CLAIM0,
                    request(REQ0, CLASS_A, tolerations=[TOLERATION_NO_SCHEDULE, TOLERATION_NO_EXECUTE]),
                ),
                one_slice(device(DEVICE1, taints=[TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE])),
            ]
        },
        [
            allocation(
                result(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    tolerations=[TOLERATION_NO_SCHEDULE, TOLERATION_NO_EXECUTE],
                ),
                node_selector=LOCAL1,
            )
        ],
    ),
    "tainted-prioritized-list": (
        lambda: {
            "documents": [
                claim(
                    CLAIM0,
                    first_available(REQ0, sub_request(SUBREQ0, CLASS_B), sub_request(SUBREQ1, CLASS_A)),
                ),
                one_slice(device(DEVICE1, taints=[TAINT_NO_SCHEDULE])),
            ]
        },
        None,
    ),
    "tainted-admin-access": (
        lambda: {
            "documents": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": ADMIN}},
                claim(CLAIM0, request(REQ0, CLASS_A, admin_access=True)),
                one_slice(device(DEVICE1, taints=[TAINT_NO_SCHEDULE])),
            ],
            "allocated": [(DRIVER_A, POOL1, DEVICE1), (DRIVER_A, POOL1, DEVICE2)],
        },
        None,
    ),
    "tainted-all-devices-single": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, all_devices=True)),
                one_slice(device(DEVICE1, taints=[TAINT_NO_SCHEDULE])),
            ]
        },
        None,
    ),
    # --- binding conditions ---
    "device-binding-conditions": (
        lambda: {
            "documents": [claim(CLAIM0, request(REQ0, CLASS_A)), one_slice(device(DEVICE1, binding=BINDING))]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING), node_selector=LOCAL1)],
    ),
    "binding-conditions-multiple-devices": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2), request(REQ1, CLASS_A)),
                one_slice(
                    device(DEVICE1, binding=BINDING),
                    device(DEVICE2, binding=(["IsPrepare2"], ["BindingFailed2"])),
                    device(DEVICE3, binding=(["IsPrepare3"], ["BindingFailed3"])),
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, binding=(["IsPrepare2"], ["BindingFailed2"])),
                result(REQ1, DRIVER_A, POOL1, DEVICE3, binding=(["IsPrepare3"], ["BindingFailed3"])),
                node_selector=LOCAL1,
            )
        ],
    ),
    "binding-conditions-with-and-without": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A)),
                one_slice(device(DEVICE1), device(DEVICE2, binding=BINDING)),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1),
                result(REQ1, DRIVER_A, POOL1, DEVICE2, binding=BINDING),
                node_selector=LOCAL1,
            )
        ],
    ),
    "node-restriction": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                resource_slice(
                    SLICE1,
                    node_label_selector("planet", "earth"),
                    POOL1,
                    DRIVER_A,
                    device(DEVICE1, binds_to_node=True),
                ),
            ]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1), node_selector=LOCAL1)],
    ),
    "partitionable-devices-with-binding-conditions": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A)),
                one_slice(device(DEVICE1, mem("4Gi"), binding=BINDING), count=2),
                counters(SLICE2, "8Gi", count=2),
            ]
        },
        [allocation(result(REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING), node_selector=LOCAL1)],
    ),
    "partitionable-devices-with-binding-conditions-multiple": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                one_slice(
                    device(DEVICE1, mem("4Gi"), binding=BINDING),
                    device(DEVICE2, mem("4Gi"), binding=(["IsPrepare2"], ["BindingFailed2"])),
                    count=2,
                ),
                counters(SLICE2, "8Gi", count=2),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, binding=(["IsPrepare2"], ["BindingFailed2"])),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-with-binding-conditions-some-devices-no-conditions": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 3)),
                one_slice(
                    device(DEVICE1, mem("2Gi"), binding=BINDING),
                    device(DEVICE2, mem("2Gi")),
                    device(DEVICE3, mem("4Gi"), binding=(["IsReady"], ["BindingTimeout"])),
                    count=2,
                ),
                counters(SLICE2, "8Gi", count=2),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING),
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                result(REQ0, DRIVER_A, POOL1, DEVICE3, binding=(["IsReady"], ["BindingTimeout"])),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-with-binding-conditions-multi-slices": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                resource_slice(
                    SLICE4, NODE1, POOL1, DRIVER_A, device(DEVICE1, mem("4Gi"), binding=BINDING), count=4
                ),
                counters(SLICE3, "8Gi", count=4),
                resource_slice(
                    SLICE2,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    device(DEVICE2, consumption("counter-set-2", {"memory": "4Gi"})),
                    count=4,
                ),
                resource_slice(
                    SLICE1,
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    count=4,
                    counter_sets=[counter_set("counter-set-2", {"memory": "8Gi"})],
                ),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                result(REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING),
                node_selector=LOCAL1,
            )
        ],
    ),
    "partitionable-devices-with-binding-conditions-and-taints": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                one_slice(
                    device(
                        DEVICE1, mem("4Gi"), binding=BINDING, taints=[taint("key1", "value1", "NoSchedule")]
                    ),
                    device(DEVICE2, mem("4Gi")),
                    count=2,
                ),
                counters(SLICE2, "8Gi", count=2),
            ]
        },
        None,
    ),
    "partitionable-devices-with-binding-conditions-and-taints-tolerated": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2, tolerations=[TOLERATION_NO_SCHEDULE_KEY1])),
                one_slice(
                    device(
                        DEVICE1, mem("4Gi"), binding=BINDING, taints=[taint("key1", "value1", "NoSchedule")]
                    ),
                    device(DEVICE2, mem("4Gi")),
                    count=2,
                ),
                counters(SLICE2, "8Gi", count=2),
            ]
        },
        [
            allocation(
                result(
                    REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING, tolerations=[TOLERATION_NO_SCHEDULE_KEY1]
                ),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, tolerations=[TOLERATION_NO_SCHEDULE_KEY1]),
                node_selector=LOCAL1,
            )
        ],
    ),
    "lexicographical-sorting-pools-with-binding-conditions": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, binding=BINDING)),
                resource_slice(SLICE3, NODE1, POOL3, DRIVER_A, device(DEVICE3)),
                resource_slice(SLICE2, NODE1, POOL2, DRIVER_A, device(DEVICE2)),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL2, DEVICE2),
                result(REQ0, DRIVER_A, POOL3, DEVICE3),
                node_selector=LOCAL1,
            )
        ],
    ),
    "lexicographical-sorting-slices-with-binding-conditions": (
        lambda: {
            "documents": [
                claim(CLAIM0, request(REQ0, CLASS_A, 2)),
                resource_slice(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, binding=BINDING), count=3),
                resource_slice(SLICE3, NODE1, POOL1, DRIVER_A, device(DEVICE3), count=3),
                resource_slice(SLICE2, NODE1, POOL1, DRIVER_A, device(DEVICE2), count=3),
            ]
        },
        [
            allocation(
                result(REQ0, DRIVER_A, POOL1, DEVICE1, binding=BINDING),
                result(REQ0, DRIVER_A, POOL1, DEVICE2),
                node_selector=LOCAL1,
            )
        ],
    ),
}
ADMIN = {"resource.kubernetes.io/admin-access": "true"}


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


@pytest.mark.parametrize("name", list(CASES))
def test_upstream_case(name: str, cel: CelSelectors) -> None:
    check_case(cel, CLASSES, CASES[name])


# --- ToleratesTaint (resourceclaim/devicetoleration_test.go's rules) ---

T = DeviceTaint("example.com/k", "NoSchedule", "v")


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        (DeviceToleration("", "Exists"), True),  # empty key with Exists: every taint
        (DeviceToleration("example.com/k", "Exists"), True),
        (DeviceToleration("example.com/k", "Exists", effect="NoSchedule"), True),
        (DeviceToleration("example.com/k", "Exists", effect="NoExecute"), False),
        (DeviceToleration("example.com/k", "Equal", "v"), True),  # empty effect: every effect
        (DeviceToleration("example.com/k", "Equal", "w"), False),
        (DeviceToleration("example.com/k", "", "v"), True),  # empty operator: Equal
        (DeviceToleration("example.com/other", "Exists"), False),
        (DeviceToleration("", "Equal", "v"), True),  # empty key: every key, the value still compared
        (DeviceToleration("example.com/k", "Lt", "v"), False),  # unknown operator: nothing
    ],
)
def test_tolerates_taint_as_upstream(toleration: DeviceToleration, tolerated: bool) -> None:
    assert tolerates(toleration, T) is tolerated


# --- DeviceTaintRule documents ---


def rule(name: str, selector: dict[str, Any] | None, effect: str = "NoSchedule") -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "example.com/unhealthy", "value": "true", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": V1, "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("selector", "effect", "expected"),
    [
        ({"driver": DRIVER_A, "pool": POOL1, "device": DEVICE1}, "NoSchedule", DEVICE2),
        ({"device": DEVICE1}, "NoExecute", DEVICE2),
        ({"driver": DRIVER_B}, "NoSchedule", DEVICE1),  # another driver's devices only
        ({"pool": POOL2}, "NoSchedule", DEVICE1),
        ({"device": DEVICE1}, "None", DEVICE1),  # informational only
        ({}, "NoSchedule", None),  # the empty selector: every device
        (None, "NoSchedule", None),  # no selector: every device too, as upstream's slice tracker applies it
    ],
)
def test_a_device_taint_rule_taints_the_devices_it_selects(
    cel: CelSelectors, selector: dict[str, Any] | None, effect: str, expected: str | None
) -> None:
    documents = [
        *CLASSES,
        rule("broken", selector, effect),
        claim(CLAIM0, request(REQ0, CLASS_A)),
        one_slice(device(DEVICE1), device(DEVICE2)),
    ]
    if expected is None:
        with pytest.raises(Unschedulable) as caught:
            allocate_documents(cel, documents)
        assert caught.value.message == (
            'cannot allocate all claims: ResourceClaim default/claim-0, request "req-0": '
            "1 matching device(s) wanted, 0 free; driver-a/pool-1/device-1 has the taint "
            "example.com/unhealthy=true:NoSchedule, which the request does not tolerate"
        )
        return
    [allocated] = allocate_documents(cel, documents)
    assert [r.device for r in allocated.results] == [expected]


def test_a_toleration_of_the_rule_taint_allows_the_device(cel: CelSelectors) -> None:
    tolerating = toleration("Equal", "example.com/unhealthy", "NoSchedule", "true")
    documents = [
        *CLASSES,
        rule("broken", {"device": DEVICE1}),
        rule("all-broken", {"driver": DRIVER_A}, "NoExecute"),
        claim(
            CLAIM0, request(REQ0, CLASS_A, tolerations=[tolerating, toleration("Exists", "", "NoExecute")])
        ),
        one_slice(device(DEVICE1)),
    ]
    [allocated] = allocate_documents(cel, documents)
    assert allocated.to_json()["devices"]["results"][0]["tolerations"] == [
        {"key": "example.com/unhealthy", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute"},
    ]


def test_the_message_names_the_first_untolerated_taint_also_for_all_devices(cel: CelSelectors) -> None:
    documents = [
        *CLASSES,
        claim(CLAIM0, request(REQ0, CLASS_A, all_devices=True)),
        one_slice(device(DEVICE1), device(DEVICE2, taints=[TAINT_NO_EXECUTE, TAINT_NO_SCHEDULE])),
    ]
    with pytest.raises(Unschedulable) as caught:
        allocate_documents(cel, documents)
    assert caught.value.message == (
        'cannot allocate all claims: ResourceClaim default/claim-0, request "req-0": '
        "all 2 matching device(s) wanted, 1 free; driver-a/pool-1/device-2 has the taint "
        "taint-key=taint-value-2:NoExecute, which the request does not tolerate"
    )
