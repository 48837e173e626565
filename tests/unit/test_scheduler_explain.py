"""Why a claim waits (scheduler/explain.py): per request, the devices each rule ruled out, the first of
them, and what about it; computed only on failure, never raised."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubedevice.scheduler import explain
from kubedevice.scheduler.allocator import AllocationRequest, Unschedulable, allocate
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.scheduler.explain import CHECKS
from kubedevice.scheduler.explanation import RULES, RequestExplanation
from tests.dra_allocator_helpers import (
    GPU,
    NODE,
    attr,
    claim,
    dev,
    device_class,
    first,
    match,
    namespace,
    pool,
    req,
    request,
    sub,
)

H100 = 'device.attributes["gpu.example.com"].model == "h100"'
NUMA = "gpu.example.com/numa"


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


def gpus() -> list[object]:
    return [
        dev("gpu-0", {"model": attr("a100"), "numa": attr(0)}),
        dev("gpu-1", {"model": attr("h100"), "numa": attr(1)}),
        dev("gpu-2", {"model": attr("h100"), "numa": attr(0)}),
        dev("gpu-3", {"model": attr("h100")}),
    ]


def d(name: str) -> str:
    return f"{GPU}/{NODE}/{name}"


def explained(req_: AllocationRequest, cel: CelSelectors) -> tuple[str, tuple[RequestExplanation, ...]]:
    with pytest.raises(Unschedulable) as caught:
        allocate(req_, cel)
    return caught.value.message, caught.value.explanation


#: name -> (request, [(request, wanted, fit, [(rule, count, first, detail)])]).
CASES: dict[
    str,
    tuple[
        Callable[[], AllocationRequest],
        list[tuple[str, int, int, list[tuple[str, int, str, str]]]],
    ],
] = {
    "in use: held by an allocated claim": (
        lambda: request([claim("c1", req("gpu", count=4))], [pool(*gpus())], in_use={(GPU, NODE, "gpu-1")}),
        [("gpu", 4, 3, [("in use", 1, d("gpu-1"), "held by an allocated claim")])],
    ),
    "in use: taken by an earlier request of the pod, in another claim": (
        lambda: request(
            [claim("c1", req("a", count=3)), claim("c2", req("b", count=2))],
            [pool(*gpus())],
        ),
        [
            ("a", 3, 4, []),
            ("b", 2, 1, [("in use", 3, d("gpu-0"), 'taken by default/c1, request "a"')]),
        ],
    ),
    "class selector, then request selector: a device counts under the first rule": (
        lambda: request(
            [
                claim(
                    "c1",
                    req(
                        "gpu",
                        cls="h100",
                        count=2,
                        selectors=('device.attributes["gpu.example.com"].numa == 0',),
                    ),
                )
            ],
            [pool(*gpus())],
            classes=[device_class("h100", selectors=(H100,))],
            in_use={(GPU, NODE, "gpu-2")},
        ),
        [
            (
                "gpu",
                2,
                0,
                [
                    ("in use", 1, d("gpu-2"), "held by an allocated claim"),
                    ("class selector", 1, d("gpu-0"), H100),
                    (
                        "request selector",
                        2,
                        d("gpu-1"),
                        'device.attributes["gpu.example.com"].numa == 0',
                    ),
                ],
            )
        ],
    ),
    "constraint: the value differs from the devices taken before it, or is not set": (
        lambda: request(
            [claim("c1", req("a", count=3), constraints=(match(NUMA),))],
            [pool(*gpus())],
        ),
        [
            (
                "a",
                3,
                2,
                [("constraint", 2, d("gpu-1"), f"matchAttribute {NUMA}: 1, the devices before: 0")],
            )
        ],
    ),
    "constraint: across requests, only those the constraint names": (
        lambda: request(
            [
                claim(
                    "c1",
                    req("a"),
                    req("b", count=2, selectors=(H100,)),
                    req("free", count=1),
                    constraints=(match(NUMA, "a", "b"),),
                )
            ],
            [pool(*gpus())],
        ),
        [
            # gpu-0 taken, the others are judged against it: within a request too.
            (
                "a",
                1,
                2,
                [("constraint", 2, d("gpu-1"), f"matchAttribute {NUMA}: 1, the devices before: 0")],
            ),
            (
                "b",
                2,
                1,
                [
                    ("in use", 1, d("gpu-0"), 'taken by default/c1, request "a"'),
                    ("constraint", 2, d("gpu-1"), f"matchAttribute {NUMA}: 1, the devices before: 0"),
                ],
            ),
            ("free", 1, 3, [("in use", 1, d("gpu-0"), 'taken by default/c1, request "a"')]),
        ],
    ),
    "a request that cannot get all it wants takes nothing": (
        lambda: request(
            [claim("c1", req("a", count=2, selectors=(H100,)), req("b", count=3))],
            [pool(*gpus())],
            in_use={(GPU, NODE, "gpu-1"), (GPU, NODE, "gpu-2")},
        ),
        [
            (
                "a",
                2,
                1,
                [
                    ("in use", 2, d("gpu-1"), "held by an allocated claim"),
                    ("request selector", 1, d("gpu-0"), H100),
                ],
            ),
            ("b", 3, 2, [("in use", 2, d("gpu-1"), "held by an allocated claim")]),
        ],
    ),
    "firstAvailable: each subrequest tried, the first that can takes": (
        lambda: request(
            [claim("c1", first("gpu", sub("four", count=4), sub("two", count=2)), req("more", count=2))],
            [pool(*gpus())],
            in_use={(GPU, NODE, "gpu-3")},
        ),
        [
            ("gpu/four", 4, 3, [("in use", 1, d("gpu-3"), "held by an allocated claim")]),
            ("gpu/two", 2, 3, [("in use", 1, d("gpu-3"), "held by an allocated claim")]),
            (
                "more",
                2,
                1,
                [("in use", 3, d("gpu-0"), 'taken by default/c1, request "gpu/two"')],
            ),
        ],
    ),
    "All: every matching device wanted, each must be free": (
        lambda: request(
            [claim("c1", req("gpu", mode="All", count=0, selectors=(H100,)))],
            [pool(*gpus())],
            in_use={(GPU, NODE, "gpu-3")},
        ),
        [
            (
                "gpu",
                3,
                2,
                [
                    ("in use", 1, d("gpu-3"), "held by an allocated claim"),
                    ("request selector", 1, d("gpu-0"), H100),
                ],
            )
        ],
    ),
    "adminAccess: devices in use count, those the same claim took do not": (
        lambda: request(
            [claim("c1", req("a", count=3), req("admin", count=2, admin=True))],
            [pool(*gpus())],
            in_use={(GPU, NODE, "gpu-3")},
            namespaces=[namespace("default", **{"resource.kubernetes.io/admin-access": "true"})],
        ),
        [
            ("a", 3, 3, [("in use", 1, d("gpu-3"), "held by an allocated claim")]),
            ("admin", 2, 1, [("in use", 3, d("gpu-0"), 'taken by default/c1, request "a"')]),
        ],
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_each_rule_rules_out_devices_with_counts_and_first_device(name: str, cel: CelSelectors) -> None:
    make, want = CASES[name]
    _, explanation = explained(make(), cel)
    got = [
        (e.request, e.wanted, e.fit, [(r.rule, r.count, r.first, r.detail) for r in e.ruled_out])
        for e in explanation
    ]
    assert got == want
    assert all(e.candidates == 4 and e.claim.startswith("default/") for e in explanation)


def test_the_message_is_unchanged_and_the_explanation_beside_it(cel: CelSelectors) -> None:
    message, explanation = explained(
        request([claim("c1", req("gpu", count=4))], [pool(*gpus())], in_use={(GPU, NODE, "gpu-1")}), cel
    )
    assert message == (
        "cannot allocate all claims: "
        'ResourceClaim default/c1, request "gpu": 4 matching device(s) wanted, 3 free'
    )
    (one,) = explanation
    assert one.text() == (
        'default/c1, request "gpu": 4 wanted, 3 of 4 fit; '
        f"in use: 1 (first: {d('gpu-1')}, held by an allocated claim)"
    )
    assert one.to_json() == {
        "claim": "default/c1",
        "request": "gpu",
        "wanted": 4,
        "candidates": 4,
        "fit": 3,
        "allocationMode": "ExactCount",
        "ruledOut": [
            {"rule": "in use", "count": 1, "first": d("gpu-1"), "detail": "held by an allocated claim"}
        ],
        "text": one.text(),
    }


def test_a_selector_error_on_a_device_counts_under_its_rule_with_the_error(cel: CelSelectors) -> None:
    bad = 'device.attributes["gpu.example.com"].numa > 0'
    message, explanation = explained(
        request([claim("c1", req("gpu", count=2, selectors=(bad,)))], [pool(*gpus())]), cel
    )
    assert "CEL runtime error" in message  # the search's own error stays the message
    (one,) = explanation
    assert [(r.rule, r.count, r.first) for r in one.ruled_out] == [("request selector", 3, d("gpu-0"))]
    assert one.ruled_out[0].detail == f"{bad}"  # gpu-0's numa is 0: false, not an error
    errors = explained(
        request([claim("c1", req("gpu", count=2, selectors=(bad,)))], [pool(dev("gpu-9"), *gpus()[1:])]), cel
    )[1][0]
    assert errors.ruled_out[0].first == d("gpu-9")
    assert errors.ruled_out[0].detail.startswith(f"{bad} (CEL runtime error: no such key: numa")


def test_a_rule_that_fails_on_a_device_rules_it_out_and_nothing_is_raised(
    cel: CelSelectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> str | None:
        raise RuntimeError("the rule broke")

    monkeypatch.setattr(explain, "CHECKS", (("in use", broken), *CHECKS[1:]))
    _, (one,) = explained(request([claim("c1", req("gpu", count=5))], [pool(*gpus())]), cel)
    assert [(r.rule, r.count, r.detail) for r in one.ruled_out] == [("in use", 4, "the rule broke")]


def test_a_fault_in_the_explanation_returns_what_was_explained(
    cel: CelSelectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = explain._explain_one
    calls: list[str] = []

    def second_fails(p: explain.RulePass, data: explain.RequestData) -> object:
        calls.append(data.name)
        if len(calls) > 1:
            raise RuntimeError("a fault")
        return real(p, data)

    monkeypatch.setattr(explain, "_explain_one", second_fails)
    message, explanation = explained(
        request([claim("c1", req("a", count=2), req("b", count=5))], [pool(*gpus())]), cel
    )
    assert message.startswith("cannot allocate all claims: ")
    assert [e.request for e in explanation] == ["a"]


def test_checks_follow_the_rules_order() -> None:
    names = [name for name, _ in CHECKS]
    assert names == [r for r in RULES if r in names]
    assert {"in use", "class selector", "request selector", "constraint"} <= set(names)


def test_nothing_is_explained_when_the_allocation_succeeds(
    cel: CelSelectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubedevice.scheduler.allocator as allocator

    def never(*_: object) -> tuple[RequestExplanation, ...]:
        raise AssertionError("explained on success")

    monkeypatch.setattr(allocator, "explain_requests", never)
    allocate(request([claim("c1", req("gpu", count=2))], [pool(*gpus())]), cel)


def test_capacity_rules_out_a_shared_device_too_full_and_shares_are_never_in_use(cel: CelSelectors) -> None:
    """Two shared devices of 8Gi, one with 6Gi consumed by an allocated claim: a request for 4Gi fits
    only the other, twice (a shared device is never taken whole by the pass)."""
    from kubedevice.resource.capacity import CapacityRequirements
    from kubedevice.resource.quantity import Quantity

    four = CapacityRequirements({"memory": Quantity.parse("4Gi")})
    shared = [dev(f"gpu-{i}", capacity={"memory": "8Gi"}, shared=True) for i in range(2)]
    consumed = {(GPU, NODE, "gpu-0"): {"memory": Quantity.parse("6Gi")}}
    req_ = request(
        [claim("c1", req("a", capacity=four), req("b", count=3, capacity=four))],
        [pool(*shared)],
        consumed=consumed,
    )
    _, explanation = explained(req_, cel)
    got = [
        (e.request, e.wanted, e.fit, [(r.rule, r.count, r.first) for r in e.ruled_out]) for e in explanation
    ]
    assert got == [("a", 1, 1, [("capacity", 1, d("gpu-0"))]), ("b", 3, 1, [("capacity", 1, d("gpu-0"))])]
    assert (
        explanation[0].ruled_out[0].detail
        == "its capacity cannot hold the request (too little left, or outside its requestPolicy)"
    )


def test_distinct_attribute_on_lists_rules_out_a_device_sharing_a_value(cel: CelSelectors) -> None:
    from kubedevice.resource.model import DeviceConstraint
    from kubedevice.resource.slice_model import AttributeValue

    roots = [
        dev("gpu-0", {"pcieRoot": AttributeValue("strings", ("pci0", "pci1"))}),
        dev("gpu-1", {"pcieRoot": AttributeValue("strings", ("pci1",))}),
        dev("gpu-2", {"pcieRoot": AttributeValue("string", "pci2")}),
    ]
    distinct = DeviceConstraint(distinct_attribute=f"{GPU}/pcieRoot")
    _, (one,) = explained(
        request([claim("c1", req("a", count=3), constraints=(distinct,))], [pool(*roots)]), cel
    )
    assert (one.fit, [(r.rule, r.count, r.first, r.detail) for r in one.ruled_out]) == (
        2,
        [
            (
                "constraint",
                1,
                d("gpu-1"),
                f"distinctAttribute {GPU}/pcieRoot: pci1 is taken by a device before",
            )
        ],
    )
    two = request([claim("c1", req("a", count=2), constraints=(distinct,))], [pool(*roots)])
    assert [r.device for r in allocate(two, cel)[0].results] == ["gpu-0", "gpu-2"]


def test_node_and_taint_rule_out_devices_in_their_rules_place(cel: CelSelectors) -> None:
    """gpu-0 is for another node (per-device node selection), gpu-1 has a NoSchedule taint."""
    from dataclasses import replace

    from kubedevice.resource.taints import DeviceTaint

    devices = [
        dev("gpu-0"),
        dev("gpu-1"),
        dev("gpu-2"),
    ]
    devices[0] = replace(devices[0], node_name="node-2")
    devices[1] = replace(devices[1], node_name=NODE, taints=(DeviceTaint("example.com/bad", "NoSchedule"),))
    devices[2] = replace(devices[2], all_nodes=True)
    built = pool(*devices)
    built = replace(built, slices=tuple(replace(s, per_device_node_selection=True) for s in built.slices))
    _, (one,) = explained(request([claim("c1", req("gpu", count=2))], [built]), cel)
    assert (one.fit, [(r.rule, r.count, r.first, r.detail) for r in one.ruled_out]) == (
        1,
        [
            ("node", 1, d("gpu-0"), "its own node selection leaves out this node"),
            ("taint", 1, d("gpu-1"), "example.com/bad:NoSchedule, which the request does not tolerate"),
        ],
    )
