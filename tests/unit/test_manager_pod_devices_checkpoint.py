"""PodDevices keeps its checkpoint entries between writes; they must always be what it holds, in order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint import PodDevicesEntry
from kubedevice.manager.pod_devices import PodDevices


def fresh_entries(pods: PodDevices) -> list[PodDevicesEntry]:
    return [
        PodDevicesEntry(
            pod_uid=pod,
            container_name=container,
            resource_name=resource,
            device_ids={numa: list(ids) for numa, ids in entry.devices_per_numa.items()},
            alloc_resp=entry.alloc_resp.SerializeToString(),
        )
        for pod, container, resource, entry in pods.entries()
    ]


def response(tag: str) -> dp.ContainerAllocateResponse:
    return dp.ContainerAllocateResponse(envs={"TAG": tag})


def test_unchanged_entries_are_the_same_objects_from_write_to_write() -> None:
    pods = PodDevices()
    pods.insert("p1", "c", "r", {0: ["a"]}, response("1"))
    first = pods.to_checkpoint()
    pods.insert("p2", "c", "r", {1: ["b"]}, response("2"))
    second = pods.to_checkpoint()
    assert second[0] is first[0] and len(second) == 2
    assert second == fresh_entries(pods)


def test_restored_entries_are_built_at_the_first_write() -> None:
    pods = PodDevices()
    pods.insert("p1", "c", "r", {0: ["a"], 1: ["b"]}, response("1"))
    restored = PodDevices.from_checkpoint(pods.to_checkpoint())
    assert restored.to_checkpoint() == pods.to_checkpoint()


OPS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete"]),
        st.sampled_from(["p1", "p2", "p3", "p4"]),
        st.sampled_from(["init", "main"]),
        st.sampled_from(["r1", "r2"]),
        st.integers(0, 99),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(OPS, st.lists(st.booleans(), max_size=30))
def test_any_sequence_of_changes_checkpoints_what_is_held(
    ops: list[tuple[str, str, str, str, int]], writes: list[bool]
) -> None:
    pods = PodDevices()
    for i, (op, pod, container, resource, n) in enumerate(ops):
        if op == "insert":
            pods.insert(pod, container, resource, {n % 2: [f"d{n}"]}, response(str(n)))
        else:
            pods.delete([pod])
        if i < len(writes) and writes[i]:
            assert pods.to_checkpoint() == fresh_entries(pods)
    assert pods.to_checkpoint() == fresh_entries(pods)
