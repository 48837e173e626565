"""Properties of the checkpoint codec over arbitrary data (hypothesis)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.checkpoint import (
    CheckpointData,
    CheckpointError,
    CorruptCheckpointError,
    PodDevicesEntry,
    checksum,
    decode,
    encode,
    spew_text,
)
from kubedevice.checkpoint.spew import (
    spew_bytes,
    spew_bytes_each,
)

# Any Unicode but lone surrogates (which no Go string or protobuf string can hold), with the characters
# that stress both the JSON escaping and the unquoted spew text drawn more often.
_TRICKY = st.sampled_from([" ", "]", "[", ":", '"', "\\", "<", ">", "&", "\n", "\x00", "\u2028", "é", "😀"])
_CHARS = st.one_of(st.characters(blacklist_categories=("Cs",)), _TRICKY)
TEXT = st.text(_CHARS, max_size=10)
IDS = st.lists(TEXT, max_size=4)
NUMA = st.one_of(st.integers(-1, 16), st.sampled_from([-(2**63), 2**63 - 1]))

ENTRY = st.builds(
    PodDevicesEntry,
    pod_uid=TEXT,
    container_name=TEXT,
    resource_name=TEXT,
    device_ids=st.none() | st.dictionaries(NUMA, IDS, max_size=4),
    alloc_resp=st.none() | st.binary(max_size=40),
)
DATA = st.builds(
    CheckpointData,
    pod_device_entries=st.none() | st.lists(ENTRY, max_size=4),
    registered_devices=st.none() | st.dictionaries(TEXT, IDS, max_size=4),
)

SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(DATA)
def test_round_trip(data: CheckpointData) -> None:
    decoded = decode(encode(data))
    assert decoded.format_version == 2
    assert decoded.data == data
    assert decoded.checksum == checksum(data)


@SETTINGS
@given(DATA)
def test_checksum_is_stable_and_reencoding_is_identical(data: CheckpointData) -> None:
    blob = encode(data)
    assert checksum(data) == checksum(data)
    assert spew_text(data) == spew_text(decode(blob).data)
    assert encode(decode(blob).data) == blob


@SETTINGS
@given(DATA, st.data())
def test_any_change_to_a_checksum_digit_is_detected(data: CheckpointData, draw: st.DataObject) -> None:
    blob = encode(data)
    match = re.search(rb'"Checksum":([0-9]+)}$', blob)
    assert match is not None
    position = draw.draw(st.integers(match.start(1), match.end(1) - 1), label="position")
    old = blob[position]
    new = draw.draw(st.integers(0, 255).filter(lambda b: b != old), label="new byte")
    damaged = blob[:position] + bytes([new]) + blob[position + 1 :]
    try:
        decoded = decode(damaged)
    except CorruptCheckpointError as err:
        assert err.expected == checksum(data)
        assert err.found != err.expected
    except CheckpointError:
        pass  # no longer a number, or not JSON at all: a format error
    else:
        raise AssertionError(f"damaged checksum accepted: {decoded.checksum}")


@SETTINGS
@given(st.lists(st.none() | st.binary(max_size=300), max_size=12))
def test_many_responses_spew_as_each_alone(responses: list[bytes | None]) -> None:
    # The batch rendering a restart uses gives what go-spew prints for each []uint8 on its own.
    expected = ["<nil>" if r is None else "[" + " ".join(str(b) for b in r) + "]" for r in responses]
    assert spew_bytes_each(responses) == expected
    assert [spew_bytes(r) for r in responses] == expected


def test_every_byte_value_spews_as_its_decimal() -> None:
    every = bytes(range(256))
    assert spew_bytes_each([every, b"", None, every[::-1]]) == [
        "[" + " ".join(map(str, range(256))) + "]",
        "[]",
        "<nil>",
        "[" + " ".join(map(str, reversed(range(256)))) + "]",
    ]
