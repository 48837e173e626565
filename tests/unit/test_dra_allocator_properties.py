"""The allocator's search is upstream's depth-first search: its answer is the first valid assignment.

Upstream tries, for each wanted device in order (claims, requests, devices), every candidate in order
(for a request's next device, only those after its previous one), and gives one back only when what
follows finds nothing. On a fixed candidate order that returns the lexicographically first valid
assignment of candidates to wanted devices, so a brute force over all assignments in that order is the
reference: same answer when there is one, none when there is none.

Devices may be shared (allowMultipleAllocations, with a `mem` capacity or none) and requests may ask an
amount of `mem`: a shared device serves any number of requests while the amounts fit, beside what
allocated claims already consume of it.

The pool may have a shared counter that devices consume (partitionable devices): an assignment is valid
only while what the chosen devices and the allocated ones consume fits in it (a shared device consumes it
once, however many shares it has), and a pool the allocated devices already overdraw gives no device
that consumes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.resource.capacity import CapacityRequirements
from kubedevice.resource.counters import Counter, CounterSet, DeviceCounterConsumption
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.slice_model import AttributeValue
from kubedevice.scheduler.allocator import Unschedulable, allocate
from kubedevice.scheduler.cel import CelSelectors
from tests.dra_allocator_helpers import GPU, NODE, attr, claim, dev, device_class, match, pool, req, request

KIND_A = "device.attributes['gpu.example.com'].kind == 'a'"
CLASSES = [device_class("any", selectors=()), device_class("a", selectors=(KIND_A,))]


@dataclass(frozen=True)
class Device:
    kind: str
    numa: int | None
    shared: bool
    memory: int | None  # the `mem` capacity, if any


@dataclass(frozen=True)
class Case:
    devices: list[Device]
    claims: list[tuple[list[tuple[str, int, int | None]], bool]]  # ([(class, count, mem wanted)], numa)
    in_use: frozenset[int]
    consumed: dict[int, int]  # mem already consumed by shares of allocated claims
    #: The pool's shared counter (None: no counters), and what each device consumes of it (None: nothing).
    counter: int | None = None
    consumes: tuple[int | None, ...] = ()


@st.composite
def cases(draw: st.DrawFn) -> Case:
    devices = draw(
        st.lists(
            st.builds(
                Device,
                st.sampled_from("ab"),
                st.one_of(st.none(), st.integers(0, 1)),
                st.booleans(),
                st.sampled_from([None, 3, 4, 6]),
            ),
            min_size=1,
            max_size=5,
        )
    )
    wanted = st.tuples(
        st.sampled_from(["any", "any", "a"]), st.integers(1, 2), st.sampled_from([None, 0, 1, 1, 2])
    )
    claims = draw(
        st.lists(
            st.tuples(st.lists(wanted, min_size=1, max_size=2), st.sampled_from([False, False, True])),
            min_size=1,
            max_size=2,
        )
    )
    in_use = draw(st.frozensets(st.integers(0, len(devices) - 1), max_size=2))
    shared_memory = [i for i, d in enumerate(devices) if d.shared and d.memory is not None]
    consumed = (
        draw(st.dictionaries(st.sampled_from(shared_memory), st.integers(0, 2))) if shared_memory else {}
    )
    counter = draw(st.one_of(st.none(), st.integers(0, 6)))
    consumes = tuple(
        draw(st.one_of(st.none(), st.integers(1, 3))) if counter is not None else None for _ in devices
    )
    return Case(devices, claims, in_use, consumed, counter, consumes)


Slot = tuple[int, int, str, int | None]  # (claim, request, class, mem wanted)


def _consumes(device: Device, wanted: int | None) -> int | None:
    """What one allocation takes of `mem`; None when the device cannot serve the request at all."""
    if device.memory is None:
        return None if wanted is not None else 0
    amount = device.memory if wanted is None else wanted
    return amount if amount <= device.memory else None


def _valid(case: Case, slots: list[Slot], choice: list[int]) -> bool:
    """Whether these devices for the first len(choice) slots break no rule (every rule is checked on the
    whole prefix: a prefix that breaks one cannot be completed)."""
    used: dict[int, int] = dict(case.consumed)
    whole: set[int] = set()
    for k, ((c, r, cls, wanted), d) in enumerate(zip(slots, choice, strict=False)):
        device = case.devices[d]
        if d in case.in_use or (cls == "a" and device.kind != "a"):
            return False
        if k and slots[k - 1][:2] == (c, r) and choice[k - 1] >= d:
            return False  # a request's devices come in candidate order
        amount = _consumes(device, wanted)
        if amount is None:
            return False
        if device.shared:
            used[d] = used.get(d, 0) + amount
            if device.memory is not None and used[d] > device.memory:
                return False
        elif d in whole:
            return False
        else:
            whole.add(d)
    if not _counters_fit(case, choice):
        return False
    for c, (_requests, numa) in enumerate(case.claims):
        values = [case.devices[d].numa for (sc, *_), d in zip(slots, choice, strict=False) if sc == c]
        if numa and values and (None in values or len(set(values)) > 1):
            return False
    return True


def _counters_fit(case: Case, choice: list[int]) -> bool:
    """The chosen devices that consume the counter (each once), beside the allocated ones."""
    if case.counter is None:
        return True
    allocated = case.in_use | case.consumed.keys()
    chosen = {d for d in choice if case.consumes[d] is not None and d not in allocated}
    if not chosen:
        return True
    left = case.counter - sum(case.consumes[d] or 0 for d in allocated)
    return left >= 0 and left - sum(case.consumes[d] or 0 for d in chosen) >= 0


def _assignments(case: Case, slots: list[Slot], choice: list[int]) -> Iterator[list[int]]:
    """Every valid assignment, in lexicographic order."""
    if len(choice) == len(slots):
        yield list(choice)
        return
    for d in range(len(case.devices)):
        choice.append(d)
        if _valid(case, slots, choice):
            yield from _assignments(case, slots, choice)
        choice.pop()


def brute_force(case: Case) -> list[list[tuple[str, str, str | None]]] | None:
    slots = [
        (c, r, cls, wanted)
        for c, (requests, _numa) in enumerate(case.claims)
        for r, (cls, count, wanted) in enumerate(requests)
        for _ in range(count)
    ]
    for choice in _assignments(case, slots, []):
        out: list[list[tuple[str, str, str | None]]] = [[] for _ in case.claims]
        for (c, r, _cls, wanted), d in zip(slots, choice, strict=True):
            device = case.devices[d]
            amount = _consumes(device, wanted) if device.shared and device.memory is not None else None
            out[c].append((f"r{r}", f"d{d}", None if amount is None else str(amount)))
        return out
    return None


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


@settings(max_examples=250, deadline=None)
@given(case=cases())
def test_the_first_valid_assignment_or_none(cel: CelSelectors, case: Case) -> None:
    devices = []
    for i, d in enumerate(case.devices):
        attributes: dict[str, AttributeValue] = {"kind": attr(d.kind)}
        if d.numa is not None:
            attributes["numaNode"] = attr(d.numa)
        memory = {"mem": str(d.memory)} if d.memory is not None else None
        use = case.consumes[i] if case.consumes else None
        consumption = (
            () if use is None else (DeviceCounterConsumption("s", {"c": Counter(str(use), use * 10**9)}),)
        )
        devices.append(dev(f"d{i}", attributes, memory, shared=d.shared, consumes_counters=consumption))
    claims = [
        claim(
            f"c{c}",
            *[
                req(
                    f"r{r}",
                    cls,
                    count=count,
                    capacity=None if wanted is None else CapacityRequirements({"mem": Quantity.of(wanted)}),
                )
                for r, (cls, count, wanted) in enumerate(requests)
            ],
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
        consumed={(GPU, NODE, f"d{i}"): {"mem": Quantity.of(n)} for i, n in case.consumed.items()},
    )
    expected = brute_force(case)
    if expected is None:
        with pytest.raises(Unschedulable) as caught:
            allocate(built, cel)
        assert caught.value.message.startswith("cannot allocate all claims: ")
    else:
        got = [
            [
                (r.request, r.device, str(r.consumed_capacity["mem"]) if r.consumed_capacity else None)
                for r in a.results
            ]
            for a in allocate(built, cel)
        ]
        assert got == expected


def test_a_shared_device_consumes_its_counters_once(cel: CelSelectors) -> None:
    """Upstream's `skipCounterCheck`: shares after the first (allocated or in this search) use no counters,
    so a second device still finds its counters left."""
    half = (DeviceCounterConsumption("s", {"c": Counter("2", 2 * 10**9)}),)
    sets = {"s": CounterSet("s", {"c": Counter("4", 4 * 10**9)})}
    shared = dev("d0", {"kind": attr("a")}, {"mem": "8"}, shared=True, consumes_counters=half)
    other = dev("d1", {"kind": attr("b")}, {"mem": "8"}, consumes_counters=half)
    two, four = (CapacityRequirements({"mem": Quantity.of(n)}) for n in (2, 4))
    claims = [claim(f"c{i}", req("r0", "a", capacity=two)) for i in range(3)]
    claims.append(claim("c3", req("r0", "any", capacity=four)))
    got = allocate(request(claims, [pool(shared, other, counter_sets=sets)], CLASSES), cel)
    assert [[r.device for r in a.results] for a in got] == [["d0"], ["d0"], ["d0"], ["d1"]]
    allocated = {(GPU, NODE, "d0"): {"mem": Quantity.of(2)}}
    built = request(
        claims[:2] + claims[3:], [pool(shared, other, counter_sets=sets)], CLASSES, consumed=allocated
    )
    assert [[r.device for r in a.results] for a in allocate(built, cel)] == [["d0"], ["d0"], ["d1"]]
