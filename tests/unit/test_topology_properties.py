"""Properties of the merge over random providers: what admission guarantees, and the closed-form best key."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.topology import BitMask, Policy, PolicyOptions, TopologyHint
from kubedevice.topology.policy import (
    HintMerger,
    best_non_preferred_affinity_count,
    flatten,
    merge_permutation,
)
from tests.unit.topology_notation import D4, numa


def _hint(nodes: int) -> st.SearchStrategy[TopologyHint]:
    # Bits up to one past the machine's nodes: a plugin may report a node the machine does not have.
    mask = st.integers(0, (1 << (nodes + 1)) - 1).map(BitMask)
    return st.builds(TopologyHint, st.one_of(st.none(), mask), st.booleans())


def _providers(nodes: int) -> st.SearchStrategy[list[Any]]:
    hint_list = st.one_of(st.none(), st.lists(_hint(nodes), max_size=4))
    provider = st.one_of(
        st.none(), st.dictionaries(st.sampled_from(["gpu", "nic", "cpu"]), hint_list, max_size=2)
    )
    return st.lists(provider, max_size=3)


scenario = st.integers(1, 4).flatmap(lambda n: st.tuples(st.just(n), _providers(n)))


def _subset(inner: BitMask | None, outer: BitMask | None) -> bool:
    return outer is None or (inner is not None and inner.value & ~outer.value == 0)


@settings(max_examples=300, deadline=None)
@given(scenario)
def test_admitted_affinity_lies_in_a_preferred_hint_of_every_provider(case: tuple[int, list[Any]]) -> None:
    nodes, providers = case
    for name in ("restricted", "single-numa-node"):
        best, admitted = Policy(name, numa(nodes)).merge(providers)
        assert admitted == best.preferred
        if not admitted:
            continue
        if name == "single-numa-node":
            assert best.numa_node_affinity is None or best.numa_node_affinity.count() == 1
        merged = best.numa_node_affinity or numa(nodes).default_affinity_mask()
        for hints in flatten(providers):
            assert any(hint.preferred and _subset(merged, hint.numa_node_affinity) for hint in hints), hints


@settings(max_examples=200, deadline=None)
@given(scenario)
def test_none_always_admits_with_an_empty_hint_and_best_effort_always_admits(
    case: tuple[int, list[Any]],
) -> None:
    nodes, providers = case
    assert Policy("none", numa(nodes)).merge(providers) == (TopologyHint(None, False), True)
    be, admitted = Policy("best-effort", numa(nodes)).merge(providers)
    assert admitted and Policy("restricted", numa(nodes)).merge(providers)[0] == be
    assert be.numa_node_affinity is not None and _subset(
        be.numa_node_affinity, numa(nodes).default_affinity_mask()
    )


def _closed_form(merger: HintMerger) -> TopologyHint:
    """The derived key: min over candidates with Count > 0 of (not P, class, fit key)."""
    default = merger.numa_info.default_affinity_mask()
    b = best_non_preferred_affinity_count(merger.lists)

    def key(hint: TopologyHint) -> tuple[Any, ...]:
        mask = hint.numa_node_affinity
        assert mask is not None
        k = mask.count()
        cls = (0, 0) if hint.preferred or k == b else ((1, -k) if k < b else (2, 0))
        fit = (
            (k, merger.numa_info.average_distance(mask), mask.value)
            if merger.use_closest
            else (k, mask.value)
        )
        return (not hint.preferred, cls, fit)

    candidates = [merge_permutation(default, p) for p in itertools.product(*merger.lists)]
    candidates = [c for c in candidates if c.numa_node_affinity is not None and c.numa_node_affinity.count()]
    return min(candidates, key=key) if candidates else TopologyHint(default, False)


@settings(max_examples=300, deadline=None)
@given(st.tuples(st.just(4), _providers(4)), st.booleans())
def test_sequential_compare_equals_the_closed_form_key(case: tuple[int, list[Any]], closest: bool) -> None:
    nodes, providers = case
    merger = HintMerger(numa(nodes, D4 if closest else None), flatten(providers), use_closest=closest)
    assert merger.merge() == _closed_form(merger)


@settings(max_examples=100, deadline=None)
@given(scenario)
def test_the_result_does_not_depend_on_resource_order(case: tuple[int, list[Any]]) -> None:
    nodes, providers = case
    reversed_maps = [dict(reversed(list(p.items()))) if p else p for p in providers]
    for name in ("best-effort", "single-numa-node"):
        policy = Policy(name, numa(nodes), PolicyOptions())
        assert policy.merge(providers) == policy.merge(reversed_maps)
