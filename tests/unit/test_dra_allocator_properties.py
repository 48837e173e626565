"""The allocator's search is upstream's depth-first search: its answer is the first valid assignment.

Upstream tries, for each wanted device in order (claims, requests, devices), every candidate in order
(for a request's next device, only those after its previous one), and gives one back only when what
follows finds nothing. On a fixed candidate order that returns the lexicographically first valid
assignment of candidates to wanted devices, so a brute force over all assignments in that order is the
reference: same answer when there is one, none when there is none.

Devices may be shared (allowMultipleAllocations, with a `mem` capacity or none) and requests may ask an
amount of `mem`: a shared device serves any number of requests while the amounts fit, beside what
allocated claims already consume of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.resource.capacity import CapacityRequirements
from kubedevice.resource.model import AttributeValue
from kubedevice.resource.quantity import Quantity
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
    return Case(devices, claims, in_use, consumed)


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
    for c, (_requests, numa) in enumerate(case.claims):
        values = [case.devices[d].numa for (sc, *_), d in zip(slots, choice, strict=False) if sc == c]
        if numa and values and (None in values or len(set(values)) > 1):
            return False
    return True


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


@settings(max_examples=150, deadline=None)
@given(case=cases())
def test_the_first_valid_assignment_or_none(cel: CelSelectors, case: Case) -> None:
    devices = []
    for i, d in enumerate(case.devices):
        attributes: dict[str, AttributeValue] = {"kind": attr(d.kind)}
        if d.numa is not None:
            attributes["numaNode"] = attr(d.numa)
        memory = {"mem": str(d.memory)} if d.memory is not None else None
        devices.append(dev(f"d{i}", attributes, memory, shared=d.shared))
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
    built = request(
        claims,
        [pool(*devices)],
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
