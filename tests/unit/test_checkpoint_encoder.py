"""The incremental encoder must give `encode()`'s bytes exactly, whatever changed between two writes."""

from __future__ import annotations

from pathlib import Path

import fnv_c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.api.constants import CHECKPOINT_NAME
from kubedevice.checkpoint import CheckpointData, CheckpointStore, PodDevicesEntry, decode, encode
from kubedevice.checkpoint import encoder as checkpoint_encoder
from kubedevice.checkpoint.encoder import CheckpointEncoder

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


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.lists(ENTRY, max_size=7), st.integers(0, 12)), min_size=1, max_size=8),
)
def test_pieces_in_small_chunks_match_a_full_encode(
    chunk_entries: int, steps: list[tuple[list[PodDevicesEntry], int]]
) -> None:
    # Tiny chunks make every step seal, keep or cut joined chunks, as 10,000 pods do with the default.
    encoder = CheckpointEncoder(chunk_entries)
    entries: list[PodDevicesEntry] = []
    registered = {"example.com/widget": ["w-1", "w-2"]}
    for added, keep in steps:
        entries = entries[: min(keep, len(entries))] + added
        data = CheckpointData(list(entries), registered)
        pieces = encoder.encode_pieces(data)
        assert b"".join(pieces) == encode(data)
        assert len(pieces) <= 4 + len(entries) // chunk_entries + chunk_entries


def test_many_entries_are_written_in_few_pieces() -> None:
    encoder = CheckpointEncoder()
    entries = [entry(i) for i in range(1000)]
    data = CheckpointData(entries, {"example.com/widget": ["w-1"]})
    pieces = encoder.encode_pieces(data)
    assert b"".join(pieces) == encode(data)
    assert len(pieces) < 1000 // checkpoint_encoder.CHUNK_ENTRIES + checkpoint_encoder.CHUNK_ENTRIES + 4


def test_the_same_registered_mapping_is_reused_and_a_new_one_is_compared() -> None:
    encoder = CheckpointEncoder()
    registered = {"example.com/widget": ["w-1", "w-2"]}
    first = CheckpointData([entry(1)], registered)
    assert encoder.encode(first) == encode(first)
    again = CheckpointData([entry(1), entry(2)], registered)
    assert encoder.encode(again) == encode(again)
    # The manager hands a new mapping when devices change; its content is what counts.
    changed = CheckpointData([entry(1), entry(2)], {"example.com/widget": ["w-2"]})
    assert encoder.encode(changed) == encode(changed)
    equal = CheckpointData([entry(1), entry(2)], {"example.com/widget": ["w-2"]})
    assert encoder.encode(equal) == encode(equal)


def test_a_failed_encode_leaves_the_next_one_correct() -> None:
    encoder = CheckpointEncoder(2)
    entries = [entry(i) for i in range(5)]
    assert encoder.encode(CheckpointData(entries, None)) == encode(CheckpointData(entries, None))
    broken = PodDevicesEntry("pod-x", "main", "example.com/widget", {0: [7]}, None)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        encoder.encode(CheckpointData([*entries[:3], broken], None))
    data = CheckpointData([*entries[:4], entry(9)], None)
    assert encoder.encode(data) == encode(data)


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_entries must be at least 1, got 0"):
        CheckpointEncoder(0)


def test_the_store_writes_more_pieces_than_one_writev_takes(tmp_path: Path) -> None:
    # 3,000 one-entry chunks: three writev batches of IOV_MAX (1,024 on Linux) and a remainder.
    encoder = CheckpointEncoder(1)
    data = CheckpointData([entry(i) for i in range(3000)], {"example.com/widget": ["w-1"]})
    store = CheckpointStore(tmp_path)
    store.write(data, encoder.encode_pieces)
    assert store.path.read_bytes() == encode(data)
    assert store.read().data == data
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT_NAME]
