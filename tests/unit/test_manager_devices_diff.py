"""Applying a snapshot by its difference from the last one must leave exactly what a full apply leaves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager.devices import ResourceDevices, Snapshot


def dev(did: str, health: str = "Healthy", numa: tuple[int, ...] = ()) -> dp.Device:
    d = dp.Device(ID=did, health=health)
    for n in numa:
        d.topology.nodes.add(ID=n)
    return d


def state(devices: ResourceDevices) -> tuple[object, ...]:
    return (devices.healthy, devices.unhealthy, devices.topology, devices.reported_healthy, devices.reported)


def full(devices: list[dp.Device]) -> tuple[ResourceDevices, object]:
    fresh = ResourceDevices()
    report = fresh.apply_snapshot(devices)
    return fresh, report


def test_a_one_percent_flip_changes_only_the_flipped_devices() -> None:
    devices = ResourceDevices()
    first = [dev(f"d{i}", numa=(i % 2,)) for i in range(200)]
    devices.apply(Snapshot.of(first))
    flipped = [dev(f"d{i}", "Unhealthy" if i in (3, 150) else "Healthy", (i % 2,)) for i in range(200)]
    report = devices.apply(Snapshot.of(flipped))
    expected, expected_report = full(flipped)
    assert state(devices) == state(expected) and report == expected_report
    assert devices.unhealthy == {"d3", "d150"} and devices.topology["d3"] == (1,)


def test_a_changed_id_that_duplicates_another_takes_the_full_path() -> None:
    devices = ResourceDevices()
    devices.apply(Snapshot.of([dev(f"d{i}") for i in range(20)]))
    # d5 becomes a second "d6" reported Unhealthy: the last occurrence wins, as in the kubelet.
    second = [dev(f"d{i}") for i in range(20)]
    second[7] = dev("d6", "Unhealthy")
    report = devices.apply(Snapshot.of(second))
    expected, expected_report = full(second)
    assert state(devices) == state(expected) and report == expected_report
    assert report.duplicate_ids == ["d6"]


def test_after_a_disconnect_the_same_list_is_applied_in_full() -> None:
    devices = ResourceDevices()
    snapshot = [dev(f"d{i}") for i in range(20)]
    devices.apply(Snapshot.of(snapshot))
    devices.mark_unhealthy()
    devices.apply(Snapshot.of(snapshot))
    assert devices.healthy == {f"d{i}" for i in range(20)} and not devices.unhealthy


IDS = st.sampled_from([f"d{i}" for i in range(12)])
HEALTH = st.sampled_from(["Healthy", "Unhealthy", "healthy", ""])
NUMA = st.lists(st.integers(0, 3), max_size=2).map(tuple)
DEVICE = st.builds(dev, IDS, HEALTH, NUMA)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(DEVICE, min_size=1, max_size=40), min_size=1, max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.data(),
)
def test_any_sequence_of_snapshots_matches_a_full_apply(
    snapshots: list[list[dp.Device]], disconnects: list[bool], data: st.DataObject
) -> None:
    devices = ResourceDevices()
    previous: list[dp.Device] = []
    for i, snapshot in enumerate(snapshots):
        if previous and data.draw(st.booleans()):
            # The usual shape: the last list again with a few devices replaced at their positions.
            snapshot = list(previous)
            for position in data.draw(st.lists(st.integers(0, len(previous) - 1), max_size=3)):
                snapshot[position] = data.draw(DEVICE)
        report = devices.apply(Snapshot.of(snapshot))
        expected, expected_report = full(snapshot)
        assert state(devices) == state(expected)
        assert report == expected_report
        if disconnects[i]:
            devices.mark_unhealthy()
        previous = snapshot
