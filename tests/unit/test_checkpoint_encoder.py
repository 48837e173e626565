"""The incremental encoder must give `encode()`'s bytes exactly, whatever changed between two writes."""

from __future__ import annotations

import fnv_c
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.manager import checkpoint_encoder
from kubedevice.manager.checkpoint import CheckpointData, PodDevicesEntry, decode, encode
from kubedevice.manager.checkpoint_encoder import CheckpointEncoder

# Lone surrogates, quotes, HTML characters and non-ASCII all take special paths in the codec.
TEXT = st.text(
    alphabet=st.sampled_from(["a", "Z", "0", "-", '"', "<", "&", "\u2028", "é", "\ud800", " "]), max_size=6
)

ENTRY = st.builds(
    PodDevicesEntry,
    pod_uid=TEXT,
    container_name=TEXT,
    resource_name=st.just("example.com/widget"),
    device_ids=st.none()
    | st.dictionaries(st.integers(-1, 12), st.none() | st.lists(TEXT, max_size=3), max_size=3),
    alloc_resp=st.none() | st.binary(max_size=12),
)
REGISTERED = st.none() | st.dictionaries(TEXT, st.none() | st.lists(TEXT, max_size=4), max_size=3)


def entry(i: int) -> PodDevicesEntry:
    return PodDevicesEntry(f"pod-{i}", "main", "example.com/widget", {i % 2: [f"w-{i}"]}, bytes([i % 256, 7]))


def test_the_continued_hash_is_fnv1a() -> None:
    continued = checkpoint_encoder._CONTINUED_FNV1A
    assert continued is not None, "fnv_c no longer exports _fnv_32: the encoder hashes whole texts"
    state = continued(0x811C9DC5, b"kubelet_")
    assert continued(state, b"internal_checkpoint") == fnv_c.fnv1a_32(b"kubelet_internal_checkpoint")


def test_appending_pods_one_by_one_matches_a_full_encode() -> None:
    encoder = CheckpointEncoder()
    entries: list[PodDevicesEntry] = []
    registered = {"example.com/widget": [f"w-{i}" for i in range(40)]}
    for i in range(40):
        entries.append(entry(i))
        data = CheckpointData(list(entries), registered)
        blob = encoder.encode(data)
        assert blob == encode(data)
    assert decode(blob).data == data


def test_removed_replaced_and_reordered_entries_match_a_full_encode() -> None:
    encoder = CheckpointEncoder()
    base = [entry(i) for i in range(10)]
    steps = [
        base,
        base[:3] + base[4:],  # a pod garbage-collected from the middle
        [*base[:3], entry(99), *base[4:]],  # replaced in place
        list(reversed(base)),
        [],
        base,
        [
            PodDevicesEntry(e.pod_uid, e.container_name, e.resource_name, e.device_ids, e.alloc_resp)
            for e in base
        ],
    ]
    for entries in steps:
        data = CheckpointData(entries, {"example.com/widget": ["w-1"]})
        assert encoder.encode(data) == encode(data)


def test_nil_entries_and_registered_devices_match_a_full_encode() -> None:
    encoder = CheckpointEncoder()
    for data in (
        CheckpointData(None, None),
        CheckpointData([entry(1)], None),
        CheckpointData([entry(1)], {"r": None}),
        CheckpointData([], {}),
        CheckpointData(None, {"r": ["a"]}),
    ):
        assert encoder.encode(data) == encode(data)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.lists(ENTRY, max_size=5), st.integers(0, 8), REGISTERED), min_size=1, max_size=6)
)
def test_any_sequence_of_writes_matches_a_full_encode(
    steps: list[tuple[list[PodDevicesEntry], int, dict[str, list[str] | None] | None]],
) -> None:
    encoder = CheckpointEncoder()
    entries: list[PodDevicesEntry] = []
    for added, keep, registered in steps:
        # Keep a prefix of the previous entries (the same objects, as the manager hands them) and add some.
        entries = entries[: min(keep, len(entries))] + added
        # No entries at all is sometimes Go's nil slice, as the manager writes before any allocation.
        data = CheckpointData(list(entries) if entries or keep % 2 else None, registered)
        assert encoder.encode(data) == encode(data)
