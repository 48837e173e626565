"""The local allocator against table cases worked out from upstream's allocator tests and the scenarios."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubedevice.resource.model import DeviceAllocationConfiguration, OpaqueConfig
from kubedevice.resource.taints import DeviceTaint, DeviceToleration
from kubedevice.scheduler.allocator import AllocationRequest, Unschedulable, allocate
from kubedevice.scheduler.cel import CelSelectors
from tests.dra_allocator_helpers import (
    GPU,
    NODE,
    attr,
    claim,
    claim_config,
    dev,
    device_class,
    first,
    match,
    namespace,
    picked,
    pool,
    req,
    request,
    sub,
)

NIC = "nic.example.com"
MEM_GE = "device.capacity['gpu.example.com'].memory.compareTo(quantity('{}')) >= 0"
ANY = device_class("any", selectors=())
NUMA = "gpu.example.com/numaNode"


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


def numa_devices() -> list[Any]:
    """Scenario 38: gpu-0 on NUMA 0, gpu-1 and gpu-2 on NUMA 1, gpu-3 on two (no attribute)."""
    return [
        dev("gpu-0", {"numaNode": attr(0)}),
        dev("gpu-1", {"numaNode": attr(1)}),
        dev("gpu-2", {NUMA: attr(1)}),
        dev("gpu-3"),
    ]


def sized(name: str, memory: str) -> Any:
    return dev(name, capacity={"memory": memory})


SUCCESS: dict[str, tuple[Callable[[], AllocationRequest], list[list[tuple[str, str]]]]] = {
    "simple": (lambda: request([claim("c1", req("gpu"))], [pool("gpu-0", "gpu-1")]), [[("gpu", "gpu-0")]]),
    "count": (
        lambda: request([claim("c1", req("gpu", count=2))], [pool("gpu-0", "gpu-1", "gpu-2")]),
        [[("gpu", "gpu-0"), ("gpu", "gpu-1")]],
    ),
    "published-order-gpu-2-first": (
        lambda: request([claim("c1", req("gpu"))], [pool("gpu-2", "gpu-10")]),
        [[("gpu", "gpu-2")]],
    ),
    "published-order-gpu-10-first": (
        lambda: request([claim("c1", req("gpu"))], [pool("gpu-10", "gpu-2")]),
        [[("gpu", "gpu-10")]],
    ),
    "pools-by-driver-then-name-as-bytes": (
        lambda: request(
            [claim("c1", req("x", "any", count=3))],
            [pool("n0", driver=NIC), pool("b0", name="node-b"), pool("a0", name="Node-a")],
            [ANY],
        ),
        [[("x", "a0"), ("x", "b0"), ("x", "n0")]],
    ),
    "devices-across-slices-in-order": (
        lambda: request(
            [claim("c1", req("gpu", count=3))], [pool("gpu-0", "gpu-1", "gpu-2", "gpu-3", slices=2)]
        ),
        [[("gpu", "gpu-0"), ("gpu", "gpu-1"), ("gpu", "gpu-2")]],
    ),
    "in-use-skipped": (
        lambda: request([claim("c1", req("gpu"))], [pool("gpu-0", "gpu-1")], in_use={(GPU, NODE, "gpu-0")}),
        [[("gpu", "gpu-1")]],
    ),
    "unsupported-device-never-a-candidate": (
        lambda: request(
            [claim("c1", req("gpu"))],
            [pool(dev("gpu-9", unsupported="node allocatable resources"), "gpu-1")],
        ),
        [[("gpu", "gpu-1")]],
    ),
    "incomplete-pool-skipped": (
        lambda: request(
            [claim("c1", req("gpu"))], [pool("gpu-0", name="a", complete=False), pool("gpu-5", name="b")]
        ),
        [[("gpu", "gpu-5")]],
    ),
    "invalid-pool-skipped": (
        lambda: request(
            [claim("c1", req("gpu"))],
            [pool("gpu-0", name="a", invalid="device gpu-0 is published twice"), pool("gpu-5", name="b")],
        ),
        [[("gpu", "gpu-5")]],
    ),
    "small-and-large-backtrack-claims": (
        lambda: request(
            [
                claim("c0", req("r0", selectors=(MEM_GE.format("1Gi"),))),
                claim("c1", req("r1", selectors=(MEM_GE.format("2Gi"),))),
            ],
            [pool(sized("large", "2Gi"), sized("small", "1Gi"))],
        ),
        [[("r0", "small")], [("r1", "large")]],
    ),
    "small-and-large-backtrack-requests": (
        lambda: request(
            [
                claim(
                    "c0",
                    req("r0", selectors=(MEM_GE.format("1Gi"),)),
                    req("r1", selectors=(MEM_GE.format("2Gi"),)),
                )
            ],
            [pool(sized("large", "2Gi"), sized("small", "1Gi"))],
        ),
        [[("r0", "small"), ("r1", "large")]],
    ),
    "several-claims-of-one-pod-scenario-36": (
        lambda: request(
            [claim("c1", req("gpu")), claim("c2", req("gpu", count=2))], [pool("gpu-0", "gpu-1", "gpu-2")]
        ),
        [[("gpu", "gpu-0")], [("gpu", "gpu-1"), ("gpu", "gpu-2")]],
    ),
    "all-devices": (
        lambda: request([claim("c1", req("gpu", mode="All"))], [pool("gpu-0", "gpu-1")]),
        [[("gpu", "gpu-0"), ("gpu", "gpu-1")]],
    ),
    "all-devices-plus-another-reversed": (
        lambda: request(
            [claim("c1", req("r0", "nic")), claim("c0", req("r0", "gpu", mode="All"))],
            [pool("gpu-0"), pool("nic-0", driver=NIC)],
            [device_class(), device_class("nic", NIC)],
        ),
        [[("r0", "nic-0")], [("r0", "gpu-0")]],
    ),
    "all-devices-backtracks-where-v1.32-gives-up": (
        lambda: request(
            [claim("c0", req("r0", "any")), claim("c1", req("r0", "gpu", mode="All"))],
            [pool("gpu-0", "gpu-1"), pool("nic-0", driver=NIC)],
            [device_class(), ANY],
        ),
        [[("r0", "nic-0")], [("r0", "gpu-0"), ("r0", "gpu-1")]],
    ),
    "match-attribute-backtracks-scenario-38": (
        lambda: request(
            [claim("c1", req("a"), req("b"), constraints=(match(NUMA, "a", "b"),))], [pool(*numa_devices())]
        ),
        [[("a", "gpu-1"), ("b", "gpu-2")]],
    ),
    "match-attribute-for-request-retry": (
        lambda: request(
            [
                claim(
                    "c0",
                    req("r0"),
                    req("r1"),
                    constraints=(match(f"{GPU}/driverVersion", "r0"), match(f"{GPU}/stringAttribute")),
                )
            ],
            [
                pool(
                    dev("d1", {"driverVersion": attr("1.0.0", "version"), "stringAttribute": attr("a")}),
                    dev("d2", {"driverVersion": attr("2.0.0", "version"), "stringAttribute": attr("b")}),
                    dev("d3", {"driverVersion": attr("3.0.0", "version"), "stringAttribute": attr("b")}),
                )
            ],
        ),
        [[("r0", "d2"), ("r1", "d3")]],
    ),
    "match-attribute-same-value-other-type-differs": (
        lambda: request(
            [claim("c1", req("a"), req("b"), constraints=(match(NUMA),))],
            [
                pool(
                    dev("gpu-0", {"numaNode": attr("1")}),
                    dev("gpu-1", {"numaNode": attr(1)}),
                    dev("gpu-2", {NUMA: attr(1)}),
                )
            ],
        ),
        [[("a", "gpu-1"), ("b", "gpu-2")]],
    ),
    "first-available-first-unavailable": (
        lambda: request(
            [claim("c1", first("gpu", sub("big", count=3), sub("one")))], [pool("gpu-0", "gpu-1")]
        ),
        [[("gpu/one", "gpu-0")]],
    ),
    "first-available-with-backtracking": (
        lambda: request(
            [
                claim(
                    "c0",
                    first(
                        "r0",
                        sub("s0", selectors=(MEM_GE.format("8Gi"),)),
                        sub("s1", selectors=(MEM_GE.format("4Gi"),)),
                    ),
                    req("r1", selectors=(MEM_GE.format("8Gi"),)),
                )
            ],
            [pool(sized("d1", "8Gi"), name="pool-1"), pool(sized("d2", "4Gi"), name="pool-2")],
        ),
        [[("r0/s1", "d2"), ("r1", "d1")]],
    ),
    "first-available-too-many-in-first-subrequest": (
        lambda: request([claim("c0", first("r0", sub("s0", count=500), sub("s1")))], [pool("gpu-0")]),
        [[("r0/s1", "gpu-0")]],
    ),
    "constraint-naming-a-subrequest": (
        lambda: request(
            [claim("c1", first("a", sub("x")), req("b"), constraints=(match(NUMA, "a/x", "b"),))],
            [pool(*numa_devices())],
        ),
        [[("a/x", "gpu-1"), ("b", "gpu-2")]],
    ),
    "admin-access-takes-devices-in-use-scenario-39": (
        lambda: request(
            [claim("mon", req("gpu", admin=True), namespace="ops")],
            [pool("gpu-0", "gpu-1")],
            in_use={(GPU, NODE, "gpu-0"), (GPU, NODE, "gpu-1")},
            namespaces=[namespace("ops", **{"resource.kubernetes.io/admin-access": "true"})],
        ),
        [[("gpu", "gpu-0")]],
    ),
    "admin-access-claims-device-allocating-for-non-admin": (
        lambda: request(
            [claim("c0", req("r0")), claim("c1", req("r0", admin=True))],
            [pool("d1", "d2")],
            namespaces=[namespace("default", **{"resource.kubernetes.io/admin-access": "true"})],
        ),
        [[("r0", "d1")], [("r0", "d1")]],
    ),
    "admin-access-takes-a-device-once-per-claim": (
        lambda: request(
            [claim("c1", req("r0", admin=True), req("r1", admin=True))],
            [pool("d1", "d2")],
            namespaces=[namespace("default", **{"resource.kubernetes.io/admin-access": "true"})],
        ),
        [[("r0", "d1"), ("r1", "d2")]],
    ),
    "thirty-two-devices-fit": (
        lambda: request([claim("c1", req("gpu", count=32))], [pool(*[f"gpu-{i}" for i in range(40)])]),
        [[("gpu", f"gpu-{i}") for i in range(32)]],
    ),
}


@pytest.mark.parametrize("name", list(SUCCESS))
def test_allocates_as_upstream(name: str, cel: CelSelectors) -> None:
    build, expected = SUCCESS[name]
    allocations = allocate(build(), cel)
    assert picked(allocations) == expected
    assert all(a.node_name == NODE for a in allocations)


def test_admin_access_results_carry_the_flag(cel: CelSelectors) -> None:
    built = SUCCESS["admin-access-claims-device-allocating-for-non-admin"][0]()
    plain, admin = allocate(built, cel)
    assert plain.results[0].admin_access is None
    assert admin.results[0].admin_access is True
    assert admin.to_json()["devices"]["results"][0]["adminAccess"] is True


def test_allocate_makes_its_own_selectors_when_none_given() -> None:
    assert picked(allocate(SUCCESS["simple"][0]())) == [[("gpu", "gpu-0")]]


FAILURE: dict[str, tuple[Callable[[], AllocationRequest], str]] = {
    "no-free-device-scenario-13": (
        lambda: request(
            [claim("c1", req("gpu"))],
            [pool("gpu-0", "gpu-1")],
            in_use={(GPU, NODE, "gpu-0"), (GPU, NODE, "gpu-1")},
        ),
        'cannot allocate all claims: ResourceClaim default/c1, request "gpu": 1 matching device(s) wanted, '
        "0 free",
    ),
    "all-or-nothing-scenario-36": (
        lambda: request(
            [claim("c1", req("gpu")), claim("c2", req("gpu", count=2))], [pool("gpu-0", "gpu-1")]
        ),
        "cannot allocate all claims: no combination of free devices satisfies every request and constraint",
    ),
    "all-with-a-device-in-use-scenario-37": (
        lambda: request(
            [claim("c-all", req("gpu", mode="All"))], [pool("gpu-0", "gpu-1")], in_use={(GPU, NODE, "gpu-0")}
        ),
        'cannot allocate all claims: ResourceClaim default/c-all, request "gpu": all 2 matching device(s) '
        "wanted, 1 free",
    ),
    "all-without-matching-devices": (
        lambda: request(
            [claim("c1", req("gpu", "nic", mode="All"))], [pool("gpu-0")], [device_class("nic", NIC)]
        ),
        'cannot allocate all claims: ResourceClaim default/c1, request "gpu": all 0 matching device(s) '
        "wanted, 0 free",
    ),
    "all-devices-no-solution": (
        lambda: request([claim("c1", req("r0")), claim("c0", req("r0", mode="All"))], [pool("d1")]),
        "cannot allocate all claims: no combination of free devices satisfies every request and constraint",
    ),
    "match-attribute-one-candidate-held-scenario-38": (
        lambda: request(
            [claim("c1", req("a"), req("b"), constraints=(match(NUMA, "a", "b"),))],
            [pool(*numa_devices())],
            in_use={(GPU, NODE, "gpu-2")},
        ),
        "cannot allocate all claims: no combination of free devices satisfies every request and constraint",
    ),
    "first-available-tested-by-its-first-subrequest": (
        lambda: request(
            [claim("c1", first("gpu", sub("two", count=2), sub("three", count=3)))],
            [pool("gpu-0", "gpu-1")],
            in_use={(GPU, NODE, "gpu-0")},
        ),
        'cannot allocate all claims: ResourceClaim default/c1, request "gpu": 2 matching device(s) wanted, '
        "1 free",
    ),
    "missing-attribute-scenario-35": (
        lambda: request(
            [claim("c1", req("gpu", selectors=("device.attributes['gpu.example.com'].model == 'x1'",)))],
            [pool("gpu-0")],
        ),
        "claim default/c1: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: no such "
        "key: model. "
        "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
        "for optional fields",
    ),
    "unknown-domain-scenario-35": (
        lambda: request(
            [claim("c1", req("gpu", selectors=("device.attributes['other.example.com'].model == 'x1'",)))],
            [pool("gpu-0")],
        ),
        "claim default/c1: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: no such "
        "key: model. "
        "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
        "for optional fields",
    ),
    "guarded-attribute-scenario-35": (
        lambda: request(
            [
                claim(
                    "c1",
                    req(
                        "gpu",
                        selectors=(
                            "has(device.attributes['gpu.example.com'].model) && "
                            "device.attributes['gpu.example.com'].model == 'x1'",
                        ),
                    ),
                )
            ],
            [pool("gpu-0", "gpu-1")],
        ),
        'cannot allocate all claims: ResourceClaim default/c1, request "gpu": 1 matching device(s) wanted, '
        "0 free",
    ),
    "class-selector-error": (
        lambda: request(
            [claim("c1", req("gpu"))],
            [pool("gpu-0")],
            [device_class(selectors=("device.attributes['x'].y",))],
        ),
        "class gpu: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: no such key: y. "
        "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
        "for optional fields",
    ),
    "error-only-on-a-device-the-search-reaches": (
        lambda: request(
            [claim("c1", req("gpu", selectors=("device.attributes['gpu.example.com'].model == 'x1'",)))],
            [pool("gpu-0", dev("gpu-1", {"model": attr("x1")}))],
            in_use={(GPU, NODE, "gpu-0")},
            # gpu-0 lacks `model` but is in use, so the search never evaluates it... and gpu-1 matches.
        ),
        "",
    ),
    "missing-class": (
        lambda: request([claim("c1", req("gpu", "nope"))], [pool("gpu-0")]),
        "claim default/c1, request gpu: could not retrieve device class nope: deviceclass.resource.k8s.io "
        '"nope" not found',
    ),
    "all-with-an-incomplete-pool": (
        lambda: request(
            [claim("c1", req("gpu", mode="All"))], [pool("gpu-0"), pool("gpu-5", name="b", complete=False)]
        ),
        "claim default/c1, request gpu: asks for all devices, but resource pool gpu.example.com/b is "
        "currently being updated",
    ),
    "all-with-an-invalid-pool": (
        lambda: request([claim("c1", req("gpu", mode="All"))], [pool("gpu-0", name="a", invalid="why")]),
        "claim default/c1, request gpu: asks for all devices, but resource pool gpu.example.com/a "
        "is currently invalid",
    ),
    "no-solution-with-an-invalid-pool": (
        lambda: request(
            [claim("c1", req("gpu", count=2))],
            [pool("gpu-0", name="a", invalid="device gpu-0 is published twice"), pool("gpu-5", name="b")],
        ),
        "invalid resource pools were encountered: gpu.example.com/a: device gpu-0 is published twice",
    ),
    "all-with-a-constraint-rejecting-a-device": (
        lambda: request(
            [claim("c1", req("gpu", mode="All"), constraints=(match(NUMA),))], [pool(*numa_devices()[:2])]
        ),
        "claim default/c1, request gpu: cannot add device gpu.example.com/node-1/gpu-1 because a claim "
        "constraint "
        "would not be satisfied",
    ),
    "over-thirty-two": (
        lambda: request([claim("c1", req("gpu", count=20), req("b", count=13))], [pool("gpu-0")]),
        "claim default/c1: number of requested devices 33 exceeds the claim limit of 32",
    ),
    "admin-access-without-namespace-scenario-39": (
        lambda: request([claim("mon", req("gpu", admin=True), namespace="ops")], [pool("gpu-0")]),
        "ResourceClaim ops/mon: spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access to "
        "devices "
        "requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace",
    ),
    "admin-access-namespace-without-label-scenario-39": (
        lambda: request(
            [claim("mon", req("a"), req("gpu", admin=True), namespace="ops")],
            [pool("gpu-0")],
            namespaces=[namespace("ops", team="a")],
        ),
        "ResourceClaim ops/mon: spec.devices.requests[1].exactly.adminAccess: Forbidden: admin access to "
        "devices "
        "requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace",
    ),
    "untolerated-taint-named-scenario-40": (
        lambda: request(
            [claim("c1", req("gpu", tolerations=(DeviceToleration("other", "Exists"),)))],
            [pool(dev("gpu-0", taints=(DeviceTaint("example.com/broken", "NoSchedule", "true"),)))],
        ),
        'cannot allocate all claims: ResourceClaim default/c1, request "gpu": 1 matching device(s) wanted, '
        "0 free; gpu.example.com/node-1/gpu-0 has the taint example.com/broken=true:NoSchedule, which the "
        "request does not tolerate",
    ),
}


@pytest.mark.parametrize("name", list(FAILURE))
def test_failure_texts(name: str, cel: CelSelectors) -> None:
    build, message = FAILURE[name]
    if not message:  # the counter-case: no error at all
        assert picked(allocate(build(), cel)) == [[("gpu", "gpu-1")]]
        return
    with pytest.raises(Unschedulable) as caught:
        allocate(build(), cel)
    assert caught.value.message == message
    assert caught.value.reason == "Unschedulable"


def opaque(parameters: Any) -> OpaqueConfig:
    return OpaqueConfig(GPU, parameters)


def test_config_scenario_41_class_entry_cleared_claim_entry_kept(cel: CelSelectors) -> None:
    time_slicing, space = {"sharing": "TimeSlicing"}, {"sharing": "SpacePartitioning"}
    built = request(
        [claim("c1", req("ts"), req("sp"), config=(claim_config(space, "sp"),))],
        [pool("gpu-0", "gpu-1")],
        [device_class(config=(time_slicing,))],
    )
    (allocation,) = allocate(built, cel)
    assert allocation.config == (
        DeviceAllocationConfiguration("FromClass", (), opaque(time_slicing)),
        DeviceAllocationConfiguration("FromClaim", ("sp",), opaque(space)),
    )
    assert allocation.to_json()["devices"]["config"] == [
        {"source": "FromClass", "opaque": {"driver": GPU, "parameters": time_slicing}},
        {"source": "FromClaim", "requests": ["sp"], "opaque": {"driver": GPU, "parameters": space}},
    ]


def test_config_once_per_class_naming_its_requests(cel: CelSelectors) -> None:
    built = request(
        [claim("c0", req("r0"), req("r1"), req("r2", "nic"))],
        [pool("d0", "d1"), pool("n1", driver=NIC)],
        [device_class(config=({"a": 1},)), device_class("nic", NIC, config=({"b": 2},))],
    )
    (allocation,) = allocate(built, cel)
    assert [(c.source, c.requests) for c in allocation.config] == [
        ("FromClass", ("r0", "r1")),
        ("FromClass", ("r2",)),
    ]


def test_config_of_chosen_subrequests_and_unnamed_entries(cel: CelSelectors) -> None:
    built = request(
        [
            claim(
                "c0",
                first("r0", sub("big", count=5), sub("one")),
                req("r1"),
                config=(
                    claim_config("for-big", "r0/big"),
                    claim_config("for-one", "r0/one"),
                    claim_config("everyone"),
                    claim_config("both", "r0/one", "r1"),
                ),
            )
        ],
        [pool("d0", "d1")],
    )
    (allocation,) = allocate(built, cel)
    assert picked([allocation]) == [[("r0/one", "d0"), ("r1", "d1")]]
    assert [(c.opaque.parameters if c.opaque else None, c.requests) for c in allocation.config] == [
        ("for-one", ("r0/one",)),
        ("everyone", ()),
        ("both", ()),
    ]


def test_a_search_deeper_than_the_stack_is_unschedulable_not_a_crash(cel: CelSelectors) -> None:
    # one frame per wanted device: 40 claims of 32 devices go past Python's recursion limit
    claims = [claim(f"c{i}", req("x", "any", count=32)) for i in range(40)]
    built = request(claims, [pool(*[f"d-{i}" for i in range(40 * 32)])], [ANY])
    with pytest.raises(Unschedulable) as caught:
        allocate(built, cel)
    assert caught.value.message == (
        "cannot allocate all claims: the pod's claims want more devices than one search can take"
    )


def nested_all(size: int) -> str:
    """`size` x `size` comprehension iterations: a selector whose cost grows with the square of its lists."""
    items = "[" + ", ".join(["1"] * size) + "]"
    return f"{items}.all(x, {items}.all(y, x == y))"


def test_a_selector_over_the_cost_budget_is_unschedulable_with_upstreams_words(cel: CelSelectors) -> None:
    built = request([claim("c1", req("gpu", selectors=(nested_all(200),)))], [pool("gpu-0")])
    with pytest.raises(Unschedulable) as caught:
        allocate(built, cel)
    assert caught.value.reason == "Unschedulable"
    assert caught.value.message == (
        "claim default/c1: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: "
        "operation cancelled: actual cost limit exceeded"
    )


def test_a_selector_within_the_cost_budget_still_selects(cel: CelSelectors) -> None:
    # 50 x 50 iterations, well inside the budget; every item is 1, so the selector is true
    built = request([claim("c1", req("gpu", selectors=(nested_all(50),)))], [pool("gpu-0")])
    assert picked(allocate(built, cel)) == [[("gpu", "gpu-0")]]
