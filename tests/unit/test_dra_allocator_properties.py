"""The allocator's search is upstream's depth-first search: its answer is the first valid assignment.

Upstream tries, for each wanted device in order (claims, requests, devices), every candidate in order,
and gives one back only when what follows finds nothing. On a fixed candidate order that returns the
lexicographically first valid assignment of candidates to wanted devices, so a brute force over all
assignments in that order is the reference: same answer when there is one, none when there is none.

The pools may have a shared counter that devices consume (partitionable devices): an assignment is valid
only while what the chosen devices and the devices in use consume fits in it, and a pool the devices in
use already overdraw gives no device that consumes it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.resource.counters import Counter, CounterSet, DeviceCounterConsumption
from kubedevice.resource.model import AttributeValue
from kubedevice.scheduler.allocator import Unschedulable, allocate
from kubedevice.scheduler.cel import CelSelectors
from tests.dra_allocator_helpers import GPU, NODE, attr, claim, dev, device_class, match, pool, req, request

KIND_A = "device.attributes['gpu.example.com'].kind == 'a'"
CLASSES = [device_class("any", selectors=()), device_class("a", selectors=(KIND_A,))]


@dataclass(frozen=True)
class Case:
    devices: list[tuple[str, int | None]]  # (kind, numa or None)
    claims: list[tuple[list[tuple[str, int]], bool]]  # ([(class, count)], numa constraint)
    in_use: frozenset[int]
    #: The pool's shared counter (None: no counters), and what each device consumes of it (None: nothing).
    counter: int | None = None
    consumes: tuple[int | None, ...] = ()


@st.composite
def cases(draw: st.DrawFn) -> Case:
    devices = draw(
        st.lists(
            st.tuples(st.sampled_from("ab"), st.one_of(st.none(), st.integers(0, 1))), min_size=1, max_size=5
        )
    )
    claims = draw(
        st.lists(
            st.tuples(
                st.lists(st.tuples(st.sampled_from(["any", "a"]), st.integers(1, 2)), min_size=1, max_size=2),
                st.booleans(),
            ),
            min_size=1,
            max_size=3,
        )
    )
    in_use = draw(st.frozensets(st.integers(0, len(devices) - 1), max_size=2))
    counter = draw(st.one_of(st.none(), st.integers(0, 6)))
    consumes = tuple(
        draw(st.one_of(st.none(), st.integers(1, 3))) if counter is not None else None for _ in devices
    )
    return Case(devices, claims, in_use, counter, consumes)


def counters_fit(case: Case, choice: tuple[int, ...]) -> bool:
    if case.counter is None:
        return True
    consuming = [case.consumes[d] or 0 for d in choice if case.consumes[d] is not None]
    if not consuming:
        return True
    left = case.counter - sum(case.consumes[d] or 0 for d in case.in_use if case.consumes[d] is not None)
    return left >= 0 and left - sum(consuming) >= 0


def brute_force(case: Case) -> list[list[tuple[str, str]]] | None:
    slots = [
        (c, f"r{r}", cls)
        for c, (requests, _numa) in enumerate(case.claims)
        for r, (cls, count) in enumerate(requests)
        for _ in range(count)
    ]
    # permutations come in lexicographic order: the order the search tries them in
    for choice in itertools.permutations(range(len(case.devices)), len(slots)):
        if case.in_use & set(choice):
            continue
        if any(
            cls == "a" and case.devices[d][0] != "a" for (_c, _r, cls), d in zip(slots, choice, strict=True)
        ):
            continue
        if not counters_fit(case, choice):
            continue
        fits = True
        for c, (_requests, numa) in enumerate(case.claims):
            if numa:
                values = [
                    case.devices[d][1] for (sc, _r, _cls), d in zip(slots, choice, strict=True) if sc == c
                ]
                fits = fits and None not in values and len(set(values)) == 1
        if fits:
            out: list[list[tuple[str, str]]] = [[] for _ in case.claims]
            for (c, r, _cls), d in zip(slots, choice, strict=True):
                out[c].append((r, f"d{d}"))
            return out
    return None


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


@settings(max_examples=250, deadline=None)
@given(case=cases())
def test_the_first_valid_assignment_or_none(cel: CelSelectors, case: Case) -> None:
    devices = []
    for i, (kind, numa) in enumerate(case.devices):
        attributes: dict[str, AttributeValue] = {"kind": attr(kind)}
        if numa is not None:
            attributes["numaNode"] = attr(numa)
        use = case.consumes[i] if case.consumes else None
        consumption = (
            () if use is None else (DeviceCounterConsumption("s", {"c": Counter(str(use), use * 10**9)}),)
        )
        devices.append(dev(f"d{i}", attributes, consumes_counters=consumption))
    claims = [
        claim(
            f"c{c}",
            *[req(f"r{r}", cls, count=count) for r, (cls, count) in enumerate(requests)],
            constraints=(match(f"{GPU}/numaNode"),) if numa else (),
        )
        for c, (requests, numa) in enumerate(case.claims)
    ]
    sets = None
    if case.counter is not None:
        sets = {"s": CounterSet("s", {"c": Counter(str(case.counter), case.counter * 10**9)})}
    built = request(
        claims,
        [pool(*devices, counter_sets=sets)],
        CLASSES,
        in_use={(GPU, NODE, f"d{i}") for i in case.in_use},
    )
    expected = brute_force(case)
    if expected is None:
        with pytest.raises(Unschedulable) as caught:
            allocate(built, cel)
        assert caught.value.message.startswith("cannot allocate all claims: ")
    else:
        assert [[(r.request, r.device) for r in a.results] for a in allocate(built, cel)] == expected
