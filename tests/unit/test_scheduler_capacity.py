"""Consumable capacity (KEP-5075) in the search: upstream's consumable_capacity_test.go and the
consumable-capacity, allow-multiple-allocations and distinct-constraint cases of allocator_testing.go, named
as there (those that need partitionable devices' counters are left to that feature's tests). Upstream's
failing cases expect no result; ours are Unschedulable, with the message the pod shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from kubedevice.resource.capacity import (
    CapacityRange,
    CapacityRequestPolicy,
    CapacityRequirements,
    DeviceCapacity,
)
from kubedevice.resource.model import (
    AllocationResult,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
)
from kubedevice.resource.quantity import Quantity
from kubedevice.scheduler.allocator import AllocationRequest, Unschedulable, allocate
from kubedevice.scheduler.candidate import Candidate
from kubedevice.scheduler.capacity import (
    AllocatingCapacity,
    consumed_capacity,
    consumed_from_request,
    violates_policy,
)
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.scheduler.search import RequestData, Search
from tests.dra_allocator_helpers import GPU, NODE, attr, claim, dev, device_class, match, pool, req, request

ZERO, ONE, TWO, THREE, FOUR = (Quantity.of(n, "BinarySI") for n in range(5))
C0, C1 = "capacity-0", "capacity-1"
FIXED = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"  # upstream's fixedShareID
MULTI = device_class(
    "multi", selectors=(f'device.driver == "{GPU}" && device.allowMultipleAllocations == true',)
)
DEDICATED = device_class(
    "dedicated", selectors=(f'device.driver == "{GPU}" && device.allowMultipleAllocations == false',)
)
PLAIN = device_class("gpu")


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


# --- consumable_capacity_test.go ------------------------------------------------------------------------


def policy_range(value: Quantity) -> DeviceCapacity:
    """upstream's withCapacityRequestPolicyRange: default 2, min 2, step 2, max 4."""
    return DeviceCapacity(value, CapacityRequestPolicy(TWO, valid_range=CapacityRange(TWO, FOUR, TWO)))


def policy_values(default: Quantity, value: Quantity, *more: Quantity) -> DeviceCapacity:
    """upstream's withCapacityRequestPolicyValidValues: the default is the first valid value."""
    return DeviceCapacity(value, CapacityRequestPolicy(default, (default, *more)))


def test_add_sub_allocating_consumed_capacity() -> None:
    allocating = AllocatingCapacity()
    allocating.insert(("d", "p", "x"), {C0: ONE})
    assert ("d", "p", "x") in allocating
    allocating.remove(("d", "p", "x"), {C0: ONE})
    assert ("d", "p", "x") not in allocating  # back to zero: the entry goes


def test_insert_remove_allocating_consumed_capacity_collection() -> None:
    allocating, device = AllocatingCapacity(), ("d", "p", "x")
    allocating.insert(device, {C0: ONE})
    allocating.insert(device, {C0: ONE})
    assert allocating.get(device) == {C0: TWO}
    allocating.remove(device, {C0: ONE})
    assert allocating.get(device) == {C0: ONE}


def test_get_consumed_capacity_from_request() -> None:
    capacity = {
        C0: DeviceCapacity(TWO, CapacityRequestPolicy(TWO, valid_range=CapacityRange(ONE))),  # requested
        C1: DeviceCapacity(TWO, CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE))),  # default
        "dummy": DeviceCapacity(ONE),  # no request, no policy: the whole value
    }
    assert consumed_capacity({C0: ONE, "dummy": ONE}, capacity) == {C0: ONE, C1: ONE, "dummy": ONE}


@pytest.mark.parametrize(
    ("requested", "policy", "violates"),
    [
        (ONE, None, False),  # no constraint
        (ONE, CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE, TWO)), False),  # less than maximum
        (TWO, CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE, ONE)), True),  # more than maximum
        (ONE, CapacityRequestPolicy(ONE, (ONE,)), False),  # in set
        (TWO, CapacityRequestPolicy(ONE, (ONE,)), True),  # not in set
    ],
    ids=["no constraint", "less than maximum", "more than maximum", "in set", "not in set"],
)
def test_violate_capacity_sharing(requested: Quantity, policy: CapacityRequestPolicy, violates: bool) -> None:
    assert violates_policy(requested, policy) is violates


CALCULATE = {
    "empty": (None, ONE, CapacityRequestPolicy(), ONE),
    "min in range": (None, TWO, CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE)), ONE),
    "default in set": (None, TWO, CapacityRequestPolicy(ONE, (ONE,)), ONE),
    "more than min in range": (TWO, TWO, CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE)), TWO),
    "less than min in range": (ONE, TWO, CapacityRequestPolicy(ONE, valid_range=CapacityRange(TWO)), TWO),
    "with step (round up)": (
        TWO,
        THREE,
        CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE, step=TWO)),
        THREE,
    ),
    "with step (no remaining)": (
        TWO,
        TWO,
        CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE, step=ONE)),
        TWO,
    ),
    "valid value in set": (TWO, THREE, CapacityRequestPolicy(ONE, (ONE, TWO, THREE)), TWO),
    "set (round up)": (TWO, THREE, CapacityRequestPolicy(ONE, (ONE, THREE)), THREE),
    "larger than set": (THREE, THREE, CapacityRequestPolicy(ONE, (ONE, TWO)), THREE),
}


@pytest.mark.parametrize("name", list(CALCULATE))
def test_calculate_consumed_capacity(name: str) -> None:
    requested, value, policy, expected = CALCULATE[name]
    assert consumed_from_request(requested, DeviceCapacity(value, policy)) == expected


def test_a_rounded_step_is_a_binary_quantity_as_upstreams_new_quantity() -> None:
    stepped = DeviceCapacity(
        Quantity.parse("8Gi"), CapacityRequestPolicy(ONE, valid_range=CapacityRange(ONE, step=TWO))
    )
    assert str(consumed_from_request(Quantity.parse("1500"), stepped)) == "1501"
    gib = Quantity.parse("1Gi")
    in_gib = DeviceCapacity(
        Quantity.parse("8Gi"), CapacityRequestPolicy(gib, valid_range=CapacityRange(gib, step=gib))
    )
    assert str(consumed_from_request(Quantity.parse("1500M"), in_gib)) == "2Gi"


# --- allocator_testing.go -----------------------------------------------------------------------------


def shared(name: str, capacity: dict[str, Any] | None = None, **attributes: Any) -> Any:
    return dev(
        name,
        {k: attr(v) if not isinstance(v, tuple) else attr(*v) for k, v in attributes.items()},
        capacity,
        shared=True,
    )


def wants(
    name: str, cls: str, amount: Quantity | None = None, mode: str = "ExactCount", count: int = 1
) -> Any:
    """upstream's deviceRequest(...).withCapacityRequest(amount): `capacity-0` of each device."""
    capacity = None if amount is None else CapacityRequirements({C0: amount})
    return req(name, cls, count=count if mode == "ExactCount" else 0, mode=mode, capacity=capacity)


def sub_wants(name: str, amount: Quantity | None = None, selectors: tuple[str, ...] = ()) -> DeviceSubRequest:
    capacity = None if amount is None else CapacityRequirements({C0: amount})
    return DeviceSubRequest(name, "gpu", selectors, capacity=capacity)


def distinct(attribute: str, *requests: str) -> DeviceConstraint:
    return DeviceConstraint(requests=requests, distinct_attribute=attribute)


def with_state(
    built: AllocationRequest, in_use: set[str] = frozenset(), **consumed: dict[str, Quantity]
) -> Any:
    """The request with allocated claims' devices: taken whole (`in_use`), or shares consuming `consumed`."""
    return AllocationRequest(
        claims=built.claims,
        classes=built.classes,
        pools=built.pools,
        in_use=frozenset((GPU, NODE, d) for d in in_use),
        namespaces=built.namespaces,
        node_name=built.node_name,
        consumed_capacity={(GPU, NODE, d.replace("_", "-")): c for d, c in consumed.items()},
    )


BOOL, VERSION, INT, STRING = (
    f"{GPU}/{n}" for n in ("boolAttribute", "driverVersion", "numa", "stringAttribute")
)
Result = tuple[str, str, dict[str, str] | None]  # (request, device, consumed capacity; None: taken whole)

SUCCESS: dict[str, tuple[Callable[[], Any], list[list[Result]]]] = {
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi")), claim("claim-1", wants("req-0", "multi"))],
            [pool(shared("device-1"))],
            [MULTI],
        ),
        [[("req-0", "device-1", {})], [("req-0", "device-1", {})]],
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi")), claim("claim-1", wants("req-0", "multi"))],
            [
                pool(
                    shared("device-1", {C0: DeviceCapacity(ONE)}),
                    shared("device-2", {C0: DeviceCapacity(ONE)}),
                )
            ],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "1"})], [("req-0", "device-2", {C0: "1"})]],
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", ONE)), claim("claim-1", wants("req-0", "multi", ONE))],
            [pool(shared("device-1", {C0: DeviceCapacity(TWO)}))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "1"})], [("req-0", "device-1", {C0: "1"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi")), claim("claim-1", wants("req-0", "multi"))],
            [pool(shared("device-1", {C0: policy_range(FOUR)}))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "2"})], [("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi")), claim("claim-1", wants("req-0", "multi"))],
            [pool(shared("device-1", {C0: policy_values(ZERO, ONE)}))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "0"})], [("req-0", "device-1", {C0: "0"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", ONE)), claim("claim-1", wants("req-0", "multi", ONE))],
            [pool(shared("device-1", {C0: policy_range(FOUR)}))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "2"})], [("req-0", "device-1", {C0: "2"})]],  # up to the minimum
    ),
    "consumable-capacity-multi-allocatable-device-with-range-policy-step": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", THREE))],
            [pool(shared("device-1", {C0: policy_range(FOUR)}))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "4"})]],  # 3 up to 2+2
    ),
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", TWO))],
            [pool(shared("device-1", {C0: policy_values(ONE, FOUR, TWO)}))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", TWO))],
            [pool(shared("device-1", {C0: policy_values(ONE, THREE, THREE)}))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "3"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining": (
        lambda: with_state(
            request(
                [claim("claim-0", wants("req-0", "multi", TWO))],
                [pool(shared("device-1", {C0: policy_range(FOUR)}))],
                [MULTI],
            ),
            device_1={C0: TWO},
        ),
        [[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device": (
        lambda: with_state(
            request(
                [claim("claim-0", wants("req-0", "multi", TWO))],
                [
                    pool(
                        shared("device-1", {C0: policy_range(TWO)}),
                        shared("device-2", {C0: policy_range(TWO)}),
                    )
                ],
                [MULTI],
            ),
            device_1={C0: TWO},
        ),
        [[("req-0", "device-2", {C0: "2"})]],
    ),
    "consumable-capacity-with-multi-allocatable-device-backtrack": (
        lambda: request(
            [
                claim(
                    "claim-0",
                    wants("req-0", "gpu", TWO),
                    wants("req-1", "gpu", TWO),
                    constraints=(match(STRING),),
                ),
                claim("claim-1", wants("req-0", "gpu", TWO)),
            ],
            [
                pool(
                    shared("device-2", {C0: policy_range(TWO)}, stringAttribute="stringAttributeValue1"),
                    shared("device-1", {C0: policy_range(FOUR)}, stringAttribute="stringAttributeValue2"),
                )
            ],
            [PLAIN],
        ),
        [
            [("req-0", "device-1", {C0: "2"}), ("req-1", "device-1", {C0: "2"})],
            [("req-0", "device-2", {C0: "2"})],
        ],
    ),
    "consumable-capacity-multi-allocatable-device-with-subrequest": (
        lambda: request(
            [
                claim(
                    "claim-0",
                    DeviceRequest(
                        "req-0",
                        first_available=(
                            sub_wants("subReq-0", FOUR),
                            sub_wants("subReq-1", TWO),
                            sub_wants("subReq-1"),
                        ),
                    ),
                )
            ],
            [pool(shared("device-1", {C0: policy_range(TWO)}))],
            [MULTI, device_class("gpu", selectors=MULTI.selectors)],
        ),
        [[("req-0/subReq-1", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", TWO, mode="All"))],
            [pool(shared("device-1", {C0: DeviceCapacity(TWO)}), shared("device-2"))],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", TWO, mode="All"))],
            [
                pool(
                    shared("device-1", {C0: DeviceCapacity(TWO)}),
                    shared("device-2", {C0: DeviceCapacity(ONE)}),
                )
            ],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient": (
        lambda: request(
            [claim("claim-0", wants("req-0", "gpu", ONE), wants("req-1", "gpu", ONE, mode="All"))],
            [
                pool(
                    shared("device-1", {C0: DeviceCapacity(TWO)}),
                    shared("device-2", {C0: DeviceCapacity(ONE)}),
                )
            ],
            [PLAIN],
        ),
        [
            [
                ("req-0", "device-1", {C0: "1"}),
                ("req-1", "device-1", {C0: "1"}),
                ("req-1", "device-2", {C0: "1"}),
            ]
        ],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient": (
        lambda: with_state(
            request(
                [claim("claim-0", wants("req-0", "gpu", ONE, mode="All"))],
                [
                    pool(
                        shared("device-1", {C0: DeviceCapacity(TWO)}),
                        shared("device-2", {C0: DeviceCapacity(ONE)}),
                    )
                ],
                [PLAIN],
            ),
            device_1={C0: ONE},
        ),
        [[("req-0", "device-1", {C0: "1"}), ("req-0", "device-2", {C0: "1"})]],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient": (
        lambda: with_state(
            request(
                [claim("claim-0", wants("req-0", "gpu", ONE, mode="All"))],
                [
                    pool(
                        shared("device-1", {C0: DeviceCapacity(ONE)}),
                        shared("device-2", {C0: DeviceCapacity(ONE)}),
                    )
                ],
                [PLAIN],
            ),
            device_1={C0: ONE},
        ),
        [[("req-0", "device-2", {C0: "1"})]],
    ),
    "consumable-capacity-dedicated-device-with-consumable-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "dedicated", ONE))],
            [pool(dev("device-1", capacity={C0: DeviceCapacity(ONE)}))],
            [DEDICATED],
        ),
        [[("req-0", "device-1", None)]],
    ),
    "with-distinct-constraints": (
        lambda: request(
            [
                claim(
                    "claim-0",
                    *(wants(f"req-{i}", "gpu") for i in range(4)),
                    constraints=(
                        distinct(BOOL, "req-0", "req-1"),
                        distinct(VERSION, "req-0", "req-1", "req-2"),
                        distinct(INT, "req-0", "req-1", "req-2", "req-3"),
                    ),
                )
            ],
            [
                pool(
                    *(
                        shared(
                            f"device-{i + 1}", driverVersion=(version, "version"), numa=i, boolAttribute=flag
                        )
                        for i, (version, flag) in enumerate(
                            [("1.0.0", True), ("1.0.1", False), ("1.0.2", True), ("1.0.0", True)]
                        )
                    )
                )
            ],
            [PLAIN],
        ),
        [[(f"req-{i}", f"device-{i + 1}", {}) for i in range(4)]],
    ),
    "with-distinct-constraints-with-subrequests": (
        lambda: request(
            [
                claim(
                    "claim-0",
                    *(
                        DeviceRequest(
                            f"req-{i}",
                            first_available=(
                                sub_wants(
                                    "subReq-0", selectors=(f'device.attributes["{GPU}"].boolAttribute',)
                                ),
                                sub_wants("subReq-1"),
                            ),
                        )
                        for i in range(3)
                    ),
                    constraints=(distinct(BOOL, "req-0", "req-1"),),
                )
            ],
            [pool(shared("device-1", boolAttribute=True), shared("device-2", boolAttribute=False))],
            [PLAIN],
        ),
        [
            [
                ("req-0/subReq-0", "device-1", {}),
                ("req-1/subReq-1", "device-2", {}),
                ("req-2/subReq-0", "device-1", {}),
            ]
        ],
    ),
    "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint": (
        lambda: request(
            [
                claim(
                    "claim-0",
                    wants("req-0", "multi", TWO),
                    wants("req-1", "multi", TWO),
                    constraints=(distinct(STRING),),
                )
            ],
            [
                pool(
                    shared("device-1", {C0: policy_range(FOUR)}, stringAttribute="stringAttributeValue1"),
                    shared("device-2", {C0: policy_range(FOUR)}, stringAttribute="stringAttributeValue2"),
                    slices=2,
                )
            ],
            [MULTI],
        ),
        [[("req-0", "device-1", {C0: "2"}), ("req-1", "device-2", {C0: "2"})]],
    ),
    "list-attributes-distinct-constraint-scalar-string-values-all-distinct": (
        lambda: request(
            [claim("claim-0", wants("req-0", "gpu", count=2), constraints=(distinct(STRING),))],
            [
                pool(
                    dev("device-1", {"stringAttribute": attr("value1")}),
                    dev("device-2", {"stringAttribute": attr("value2")}),
                )
            ],
            [PLAIN],
        ),
        [[("req-0", "device-1", None), ("req-0", "device-2", None)]],
    ),
}

DEVICE_1_NO_CAPACITY = (
    "; gpu.example.com/node-1/device-1: its capacity cannot hold the request (too little left, or outside "
    "its requestPolicy)"
)

FAILURE: dict[str, tuple[Callable[[], Any], str]] = {
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "gpu", ONE))],
            [pool(shared("device-1", {C1: DeviceCapacity(ONE)}))],
            [PLAIN],
        ),
        'ResourceClaim default/claim-0, request "req-0": 1 matching device(s) wanted, 0 free'
        + DEVICE_1_NO_CAPACITY,
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", ONE, mode="All"))],
            [pool(shared("device-1", {C1: DeviceCapacity(ONE)}))],
            [MULTI],
        ),
        'ResourceClaim default/claim-0, request "req-0": all 0 matching device(s) wanted, 0 free',
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi")), claim("claim-1", wants("req-0", "multi"))],
            [pool(shared("device-1", {C0: DeviceCapacity(TWO)}))],
            [MULTI],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", ONE))],
            [pool(shared("device-1", {C0: policy_values(ZERO, ONE)}))],
            [MULTI],
        ),
        'ResourceClaim default/claim-0, request "req-0": 1 matching device(s) wanted, 0 free'
        + DEVICE_1_NO_CAPACITY,
    ),
    "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", ONE)), claim("claim-1", wants("req-0", "multi", TWO))],
            [pool(shared("device-1", {C0: policy_range(TWO)}))],
            [MULTI],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy": (
        lambda: request(
            [claim("claim-0", wants("req-0", "multi", Quantity.of(6, "BinarySI")))],
            [pool(shared("device-1", {C0: policy_range(Quantity.of(10, "BinarySI"))}))],
            [MULTI],
        ),
        'ResourceClaim default/claim-0, request "req-0": 1 matching device(s) wanted, 0 free'
        + DEVICE_1_NO_CAPACITY,
    ),
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity": (
        lambda: with_state(
            request(
                [claim("claim-0", wants("req-0", "multi", TWO))],
                [pool(shared("device-1", {C0: policy_range(TWO)}))],
                [MULTI],
            ),
            device_1={C0: TWO},
        ),
        'ResourceClaim default/claim-0, request "req-0": 1 matching device(s) wanted, 0 free'
        + DEVICE_1_NO_CAPACITY,
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient": (
        lambda: request(
            [claim("claim-0", wants("req-0", "gpu", ONE), wants("req-1", "gpu", ONE, mode="All"))],
            [
                pool(
                    shared("device-1", {C0: DeviceCapacity(ONE)}),
                    shared("device-2", {C0: DeviceCapacity(ONE)}),
                )
            ],
            [PLAIN],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
    "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request": (
        lambda: request(
            [
                claim("claim-0", wants("req-0", "dedicated", ONE)),
                claim("claim-1", wants("req-0", "dedicated", ONE)),
            ],
            [pool(dev("device-1", capacity={C0: policy_range(TWO)}))],
            [DEDICATED],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
    "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector": (
        lambda: request(
            [claim("claim-0", wants("req-0", "dedicated", ONE))],
            [pool(shared("device-1", {C0: DeviceCapacity(ONE)}))],
            [DEDICATED],
        ),
        'ResourceClaim default/claim-0, request "req-0": 1 matching device(s) wanted, 0 free',
    ),
    "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated": (
        lambda: with_state(
            request(
                [claim("claim-0", wants("req-0", "multi", ONE))],
                [pool(shared("device-1", {C0: policy_range(TWO)}))],
                [MULTI],
            ),
            in_use={"device-1"},
        ),
        'ResourceClaim default/claim-0, request "req-0": 1 matching device(s) wanted, 0 free',
    ),
    "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable": (
        lambda: with_state(
            request(
                [claim("claim-0", wants("req-0", "multi", ONE))],
                [pool(dev("device-1", capacity={C0: policy_range(TWO)}))],
                [MULTI],
            ),
            device_1={C0: ONE},
        ),
        'ResourceClaim default/claim-0, request "req-0": 1 matching device(s) wanted, 0 free',
    ),
    "with-distinct-constraints-attribute-not-set": (
        lambda: request(
            [claim("claim-0", wants("req-0", "gpu"), constraints=(distinct(BOOL, "req-0"),))],
            [pool(shared("device-1"))],
            [PLAIN],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
    "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint": (
        lambda: request(
            [
                claim(
                    "claim-0",
                    wants("req-0", "multi", ONE),
                    wants("req-1", "multi", ONE),
                    constraints=(distinct(STRING),),
                )
            ],
            [pool(shared("device-1", {C0: policy_range(TWO)}, stringAttribute="stringAttributeValue"))],
            [MULTI],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
    "list-attributes-distinct-constraint-scalar-string-values-not-distinct": (
        lambda: request(
            [claim("claim-0", wants("req-0", "gpu", count=2), constraints=(distinct(STRING),))],
            [
                pool(
                    dev("device-1", {"stringAttribute": attr("value1")}),
                    dev("device-2", {"stringAttribute": attr("value1")}),
                )
            ],
            [PLAIN],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
    # Ours: every device of the request counts. Upstream keeps one value per request name, so a third
    # device is compared with the second only and it would allocate value1, value2, value1.
    "distinct-within-one-request-counts-every-device": (
        lambda: request(
            [claim("claim-0", wants("req-0", "gpu", count=3), constraints=(distinct(STRING),))],
            [
                pool(
                    *(
                        dev(f"device-{i}", {"stringAttribute": attr(v)})
                        for i, v in enumerate(["value1", "value2", "value1"])
                    )
                )
            ],
            [PLAIN],
        ),
        "no combination of free devices satisfies every request and constraint",
    ),
}


def shown(allocations: list[AllocationResult]) -> list[list[Result]]:
    out: list[list[Result]] = []
    for allocation in allocations:
        results: list[Result] = []
        for r in allocation.results:
            assert r.share_id is not None or r.consumed_capacity is None
            consumed = (
                None if r.share_id is None else {k: str(q) for k, q in (r.consumed_capacity or {}).items()}
            )
            assert r.share_id in (None, FIXED)
            results.append((r.request, r.device, consumed))
        out.append(results)
    return out


@pytest.mark.parametrize("name", list(SUCCESS))
def test_allocates_as_upstream(name: str, cel: CelSelectors) -> None:
    build, expected = SUCCESS[name]
    assert shown(allocate(build(), cel, share_ids=lambda: FIXED)) == expected


@pytest.mark.parametrize("name", list(FAILURE))
def test_refuses_as_upstream(name: str, cel: CelSelectors) -> None:
    build, message = FAILURE[name]
    with pytest.raises(Unschedulable) as caught:
        allocate(build(), cel)
    assert caught.value.message == f"cannot allocate all claims: {message}"


def test_capacity_fits_is_asked_without_side_effect(cel: CelSelectors) -> None:
    device = shared("device-1", {C0: DeviceCapacity(TWO)})
    candidate = Candidate((GPU, NODE, "device-1"), device)
    search = Search(["default/c"], [1], {}, [[]], [candidate], frozenset(), cel, {candidate.id: {C0: ONE}})
    data = RequestData("default/c", "r", None, PLAIN, (), False, False, 1, capacity={C0: ONE})
    assert search.capacity_fits(data, candidate) and search.capacity_fits(data, candidate)
    assert not search.capacity_fits(replace(data, capacity={C0: TWO}), candidate)
    assert search.capacity_in_use(candidate.id) and not search.capacity_in_use((GPU, NODE, "other"))
