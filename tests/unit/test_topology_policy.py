"""Every merge vector of the kubelet's policy tests and the derived ones (the project SPEC's table, §12.8)."""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.topology import BitMask, Policy, PolicyOptions
from kubedevice.topology.policy import HintMerger, flatten
from tests.unit.topology_notation import D4, D8, h, hs, numa

BE, R, SNN = "best-effort", "restricted", "single-numa-node"
ALL4 = "{0,1,2,3}"

# (vector id, providers' hints, {policy: (nodes, closest, expected hint, admit)})
# `closest` None: no distances; "D4"/"D8": prefer-closest on with that distance table.
_NO_PREFERENCE: list[Any] = [[], [{}], [None], [{"r": None}], [{"r": hs("nilT")}]]
_IMPOSSIBLE: list[Any] = [[{"r": []}], [{"r": hs("nilF")}]]

VECTORS: list[tuple[str, list[Any], dict[str, tuple[int, str | None, str, bool]]]] = [
    *(
        (
            f"1-{i}",
            p,
            {BE: (4, None, ALL4 + "T", True), R: (4, None, ALL4 + "T", True), SNN: (2, None, "nilT", True)},
        )
        for i, p in enumerate(_NO_PREFERENCE)
    ),
    *(
        (
            f"2-{i}",
            p,
            {BE: (4, None, ALL4 + "F", True), R: (4, None, ALL4 + "F", False), SNN: (2, None, "nilF", False)},
        )
        for i, p in enumerate(_IMPOSSIBLE)
    ),
    (
        "3",
        [{"r1": hs("{0}T")}, {"r2": hs("{1}T")}],
        {BE: (4, None, ALL4 + "F", True), R: (4, None, ALL4 + "F", False), SNN: (2, None, "nilF", False)},
    ),
    (
        "4",
        [{"r1": hs("{0}T")}, {"r2": hs("{0}F")}],
        {BE: (4, None, "{0}F", True), R: (4, None, "{0}F", False), SNN: (2, None, "nilF", False)},
    ),
    (
        "5",
        [{"r1": hs("{0}T")}, {"r2": hs("{0,1}T")}],
        {BE: (4, None, "{0}F", True), R: (4, None, "{0}F", False)},
    ),
    (
        "6",
        [{"r1": hs("{0}T", "{1}T")}, {"r2": hs("{0,1}F")}],
        {BE: (4, None, "{0}F", True), R: (4, None, "{0}F", False), SNN: (2, None, "nilF", False)},
    ),
    (
        "7",
        [{"r1": hs("{0}T", "{1}T")}, {"r2": hs("{0}T", "{0,1}F")}],
        {BE: (4, None, "{0}T", True), R: (4, None, "{0}T", True), SNN: (2, None, "{0}T", True)},
    ),
    *(
        (
            f"8-{name}",
            p,
            {BE: (4, None, "{1}T", True), R: (4, None, "{1}T", True), SNN: (2, None, "{1}T", True)},
        )
        for name, p in (
            ("two-providers", [{"r1": hs("{1}T", "{0,1}F")}, {"r2": hs("{0}T", "{1}T", "{0,1}F")}]),
            ("one-provider", [{"r1": hs("{1}T", "{0,1}F"), "r2": hs("{0}T", "{1}T", "{0,1}F")}]),
        )
    ),
    (
        "9",
        [{"r1": hs("{0,1}T", "{0,2}T")}, {"r2": hs("{0,1}T", "{0,2}T")}],
        {BE: (4, None, "{0,1}T", True), R: (4, None, "{0,1}T", True)},
    ),
    *(
        (
            f"10-{m}",
            [{"r1": hs(ALL4 + "F", "{0,1}F")}, {"r2": hs(m + "F")}],
            {BE: (4, None, m + "F", True), R: (4, None, m + "F", False)},
        )
        for m in ("{0,1}", "{0,3}", "{1,2}", "{2,3}")
    ),
    (
        "11",
        [{"r1": hs(ALL4 + "F", "{0,1}F")}, {"r2": hs("{1,2}F", "{2,3}F")}],
        {BE: (4, None, "{1,2}F", True), R: (4, None, "{1,2}F", False)},
    ),
    (
        "11-closest",
        [{"r1": hs(ALL4 + "F", "{0,1}F")}, {"r2": hs("{1,2}F", "{2,3}F")}],
        {BE: (8, "D8", "{2,3}F", True), R: (8, "D8", "{2,3}F", False)},
    ),
    (
        "12",
        [{"r1": hs(ALL4 + "F", "{0,1}F")}, {"r2": hs("{1,2,3}F", "{1,2}F", "{1,3}F", "{2,3}F")}],
        {BE: (4, None, "{1,2}F", True), R: (4, None, "{1,2}F", False)},
    ),
    (
        "12-closest",
        [{"r1": hs(ALL4 + "F", "{0,1}F")}, {"r2": hs("{1,2,3}F", "{1,2}F", "{1,3}F", "{2,3}F")}],
        {BE: (8, "D8", "{2,3}F", True), R: (8, "D8", "{2,3}F", False)},
    ),
    (
        "13a",
        [{"r1": hs("{0,4}T", "{0,2}T")}, {"r2": hs("{0,4}T", "{0,2}T")}],
        {BE: (8, "D8", "{0,2}T", True), R: (8, "D8", "{0,2}T", True)},
    ),
    (
        "13b",
        [{"r1": hs("{4}T", "{0,2}T")}, {"r2": hs("{4}T", "{0,2}T")}],
        {BE: (8, "D8", "{4}T", True), R: (8, "D8", "{4}T", True)},
    ),
    ("14", [{"r1": hs("{0,1}T"), "r2": hs("{0}T", "{1}T", "{0,1}F")}], {SNN: (2, None, "nilF", False)}),
    ("15", [{"r1": hs("{0}T", "{1}T", "{0,1}F")}, None], {SNN: (2, None, "{0}T", True)}),
    *(
        (
            f"{n}",
            [{"r": lst}],
            {BE: (2, None, "{0,1}F", True), R: (2, None, "{0,1}F", False), SNN: (2, None, "nilF", False)},
        )
        for n, lst in (("16", hs("{0,1}F")), ("17", hs("{0,1}F")), ("18", []))
    ),
    (
        "19",
        [{"r": hs("{0,2}T", "{0,3}T", "{2,3}T", "{0,1,2}F", "{0,1,3}F", "{0,2,3}F", "{1,2,3}F", ALL4 + "F")}],
        {BE: (4, None, "{0,2}T", True), R: (4, None, "{0,2}T", True), SNN: (4, None, "nilF", False)},
    ),
    (
        "19-closest",
        [{"r": hs("{0,2}T", "{0,3}T", "{2,3}T", "{0,1,2}F", "{0,1,3}F", "{0,2,3}F", "{1,2,3}F", ALL4 + "F")}],
        {BE: (4, "D4", "{2,3}T", True), R: (4, "D4", "{2,3}T", True), SNN: (4, "D4", "nilF", False)},
    ),
    (
        "20",
        [{"gpu": hs("{0}T")}],
        {BE: (1, None, "{0}T", True), R: (1, None, "{0}T", True), SNN: (1, None, "nilT", True)},
    ),
    (
        "21",
        [{"gpu": hs("{1}T", "{0,1}F"), "nic": hs("{2}T", "{2,3}F", "{1,2}F")}, {"cpu": hs("{0}T", "{0,1}F")}],
        {BE: (4, None, "{1}F", True), R: (4, None, "{1}F", False), SNN: (4, None, "nilF", False)},
    ),
    *(
        (
            f"22{suffix}",
            [
                {"gpu": hs("{1}T", "{2}T", "{0,1}F", "{1,2}F")},
                {"cpu": hs("{1}T", "{2}T", "{0,1}F", "{1,2}F", ALL4 + "F")},
                {"memory": hs("{2}T", "{1,2}F", "{2,3}F")},
            ],
            {p: (4, closest, "{2}T", True) for p in (BE, R, SNN)},
        )
        for suffix, closest in (("", None), ("-closest", "D4"))
    ),
    (
        "23",
        [{"gpu": []}, {"cpu": hs("{0}T", "{1}T")}],
        {BE: (2, None, "{0}F", True), R: (2, None, "{0}F", False)},
    ),
]

CASES = [
    pytest.param(providers, policy, *expected, id=f"#{vid}-{policy}")
    for vid, providers, by_policy in VECTORS
    for policy, expected in by_policy.items()
]


@pytest.mark.parametrize(("providers", "policy", "nodes", "closest", "hint", "admit"), CASES)
def test_merge_vector(
    providers: list[Any], policy: str, nodes: int, closest: str | None, hint: str, admit: bool
) -> None:
    table = {"D4": D4, "D8": D8}.get(closest or "")
    p = Policy(policy, numa(nodes, table), PolicyOptions(prefer_closest_numa=table is not None))
    best, ok = p.merge(providers)
    assert (str(best), ok) == (str(h(hint)), admit)
    assert best == h(hint)


def test_none_policy_admits_with_no_hint_whatever_the_providers_say() -> None:
    p = Policy("none", numa(2))
    assert p.merge([{"r": []}, {"r2": hs("{0}F")}]) == (h("nilF"), True)


@pytest.mark.parametrize(
    ("cur", "cand", "winner"),
    [("{0}F", "{0,1,2}F", "cur"), ("{0}F", "{0,1}F", "cand"), ("{1,2}F", "{0,1}F", "cand")],
)
def test_compare_hints_narrowest_with_best_non_preferred_count_2(cur: str, cand: str, winner: str) -> None:
    merger = HintMerger(numa(4), [], use_closest=False)
    result = merger.compare(h(cur), h(cand), 2)
    assert result == (h(cur) if winner == "cur" else h(cand))


@pytest.mark.parametrize(
    ("m1", "m2", "closest"), [((0, 3), (0, 1), (0, 1)), ((2, 3), (0, 3), (2, 3)), ((0, 2), (0, 3), (0, 2))]
)
def test_closest_by_average_distance_then_integer_value(
    m1: tuple[int, ...], m2: tuple[int, ...], closest: tuple[int, ...]
) -> None:
    info = numa(4, D4)
    assert info.closest(BitMask.of(*m1), BitMask.of(*m2)) == BitMask.of(*closest)
    assert info.closest(BitMask.of(*m2), BitMask.of(*m1)) == BitMask.of(*closest)


def test_average_distances_of_the_d4_table() -> None:
    info = numa(4, D4)
    averages = [info.average_distance(BitMask.of(*m)) for m in ((0,), (0, 1), (0, 2), (0, 2, 3), ())]
    assert averages == pytest.approx([10, 10.5, 11, 100 / 9, 0])


def test_flatten_keeps_none_and_empty_apart() -> None:
    assert flatten([None, {}, {"a": None, "b": [], "c": hs("{0}T")}]) == [
        hs("nilT"), hs("nilT"), hs("nilT"), hs("nilF"), hs("{0}T")
    ]  # fmt: skip


def test_zero_numa_nodes_make_restricted_and_single_numa_node_refuse_everything() -> None:
    for policy in (R, SNN):
        assert not Policy(policy, numa(0)).merge([])[1]
    assert Policy(BE, numa(0)).merge([])[1]
