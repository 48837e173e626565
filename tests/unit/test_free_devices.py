"""FreeDevices answers "the smallest free IDs" from a lazy heap: it must agree with the set it is."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.manager.free_devices import FreeDevices, Picker

IDS = st.sampled_from([f"dev-{i:02d}" for i in range(12)])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("smallest"), st.integers(0, 4)),
        st.tuples(st.just("discard"), st.lists(IDS, max_size=3)),
        st.tuples(st.just("give_back"), st.lists(IDS, max_size=3)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.sets(IDS), OPS)
def test_smallest_agrees_with_a_plain_set_through_any_changes(
    start: set[str], ops: list[tuple[str, object]]
) -> None:
    free = FreeDevices(start)
    model = set(start)
    for op, arg in ops:
        if op == "smallest":
            assert isinstance(arg, int)
            assert free.smallest(arg) == sorted(model)[:arg]
        elif op == "discard":
            assert isinstance(arg, list)
            free.difference_update(arg)
            model.difference_update(arg)
        else:
            assert isinstance(arg, list)
            free.give_back(arg)
            model.update(arg)
        assert free == model


def test_set_operators_give_plain_sets() -> None:
    free = FreeDevices({"a", "b"})
    assert type(free | {"c"}) is set and type(free - {"a"}) is set


def test_a_picker_takes_the_smallest_and_leaves_the_free_set() -> None:
    free = FreeDevices({"dev-3", "dev-1", "dev-2"})
    reserved: set[str] = set()
    picker = Picker(1, reserved, {"r": free}, "r")
    assert picker.take(free)
    assert picker.picked == {"dev-1"} == reserved and free == {"dev-2", "dev-3"}
    second = Picker(2, reserved, {"r": free}, "r")
    assert second.take(free)
    assert second.picked == {"dev-2", "dev-3"} and not free
    picker.release()
    assert reserved == {"dev-2", "dev-3"}
