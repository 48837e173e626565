"""The DRA checkpoint (`dra_manager_state`) codec: the kubelet's bytes both ways, and Go's reading rules."""

from __future__ import annotations

import json
import random
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.checkpoint import (
    CheckpointFormatError,
    ClaimInfoState,
    CorruptCheckpointError,
    CorruptDRACheckpointError,
    DRACheckpointData,
    DRADevice,
    decode_dra,
    decode_dra_unverified,
    encode,
    encode_dra,
    is_dra_checkpoint,
)
from kubedevice.checkpoint.model import CheckpointData
from tests.dra_vectors import C4, HEAD, VECTORS, entries_form, vector_file, whole_file

# The spec's whole files, verbatim.
C1_FILE = (
    b'{"Data":"{\\"kind\\":\\"DRACheckpoint\\",\\"apiVersion\\":\\"checkpoint.dra.kubelet.k8s.io/v1\\",'
    b'\\"ClaimInfoStateList\\":[]}","Checksum":2361995144}'
)
C2_FILE = (
    b'{"Data":"{\\"kind\\":\\"DRACheckpoint\\",\\"apiVersion\\":\\"checkpoint.dra.kubelet.k8s.io/v1\\",'
    b'\\"ClaimInfoStateList\\":null}","Checksum":4010664294}'
)
C8_FILE = (
    b'{"Data":"{\\"kind\\":\\"DRACheckpoint\\",\\"apiVersion\\":\\"checkpoint.dra.kubelet.k8s.io/v1\\",'
    b'\\"ClaimInfoStateList\\":[{\\"ClaimUID\\":\\"5d6c8a0e-2f4b-4c1d-9e7a-0b1c2d3e4f50\\",'
    b'\\"ClaimName\\":\\"cap\\\\u003cshare\\\\u003e\\\\u0026\\",\\"Namespace\\":\\"default\\",'
    b'\\"PodUIDs\\":{\\"p1\\":{}},\\"DriverState\\":{\\"nic.example.com\\":{\\"Devices\\":['
    b'{\\"PoolName\\":\\"node-1\\",\\"DeviceName\\":\\"eth1\\",'
    b'\\"ShareID\\":\\"0f2d4c6e-8a0b-4c2d-9e1f-3a5b7c9d1e2f\\",\\"RequestNames\\":null,'
    b'\\"CDIDeviceIDs\\":[\\"nic.example.com/vf=eth1-3\\"]}]}}}]}","Checksum":2085975979}'
)

C3_DEVICE = DRADevice("worker-1", "dev-1", ("test request",), ("example.com/example=cdi-example",))
POD = "139cdb46-f989-4f17-9561-ca10cfb509a6"


def _with_share_ids(inner: str) -> str:
    """The newest writer's form: ``"ShareID":null`` after every ``DeviceName``."""
    return re.sub(r'("DeviceName":"[^"]*",)', r'\1"ShareID":null,', inner)


def _file_of(inner: str) -> bytes:
    """A file whose checksum holds for this Data string."""
    return whole_file(inner, zlib.crc32(inner.encode()))


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_every_vector_checksum_is_the_crc32_of_its_data_and_it_decodes(name: str) -> None:
    inner, checksum = VECTORS[name]
    assert zlib.crc32(inner.encode()) == checksum
    raw = vector_file(name)
    assert json.loads(raw) == {"Data": inner, "Checksum": checksum}
    decode_dra(raw)  # verifies
    found = decode_dra_unverified(raw)
    assert found.valid and found.checksum == found.computed_checksum == checksum


def test_the_whole_files_byte_for_byte() -> None:
    assert vector_file("C1") == C1_FILE
    assert vector_file("C2") == C2_FILE
    assert vector_file("C8") == C8_FILE
    assert encode_dra(DRACheckpointData(())) == C1_FILE
    assert encode_dra(DRACheckpointData()) == C2_FILE
    c8 = ClaimInfoState(
        "5d6c8a0e-2f4b-4c1d-9e7a-0b1c2d3e4f50",
        "cap<share>&",
        "default",
        frozenset({"p1"}),
        {
            "nic.example.com": (
                DRADevice(
                    "node-1",
                    "eth1",
                    None,
                    ("nic.example.com/vf=eth1-3",),
                    "0f2d4c6e-8a0b-4c2d-9e1f-3a5b7c9d1e2f",
                ),
            )
        },
    )
    assert encode_dra(DRACheckpointData((c8,))) == C8_FILE
    assert decode_dra(C8_FILE) == DRACheckpointData((c8,))


# C7 is written as v1.32 writes it (no ShareID), so it is among the forms below.
@pytest.mark.parametrize("name", ["C1", "C2", "C6", "C8"])
def test_newest_writer_forms_encode_back_to_the_same_bytes(name: str) -> None:
    raw = vector_file(name)
    assert encode_dra(decode_dra(raw)) == raw


@pytest.mark.parametrize(("name", "devices"), [("C3", 1), ("C4", 2), ("C7", 2)])
def test_files_without_share_id_are_written_back_with_share_id_null(name: str, devices: int) -> None:
    inner = _with_share_ids(VECTORS[name][0])
    assert inner.count('"ShareID":null') == devices
    assert encode_dra(decode_dra(vector_file(name))) == _file_of(inner)


def test_c6_is_c3_with_share_id() -> None:
    assert encode_dra(decode_dra(vector_file("C3"))) == vector_file("C6")


def test_the_decoded_content_of_c3_c4_and_c7() -> None:
    c3 = decode_dra(vector_file("C3"))
    assert c3 == DRACheckpointData(
        (
            ClaimInfoState(
                "067798be-454e-4be4-9047-1aa06aea63f7",
                "example",
                "default",
                frozenset({POD}),
                {"test-driver.cdi.k8s.io": (C3_DEVICE,)},
            ),
        )
    )
    c4 = decode_dra(vector_file("C4")).claims
    assert c4 is not None and [c.claim_name for c in c4] == ["example-1", "example-2"]
    assert c4[1].driver_state == {
        "test-driver.cdi.k8s.io": (DRADevice("worker-1", "dev-2", None, None, None),)
    }
    (c7,) = decode_dra(vector_file("C7")).claims or ()
    assert (c7.namespace, c7.claim_name, c7.key) == ("ml", "shared-gpu", "ml/shared-gpu")
    assert c7.pod_uids == frozenset({"pod-a", "pod-b"})
    assert c7.driver_state is not None and c7.driver_state["nic.example.com"] is None
    gpus = c7.driver_state["gpu.example.com"] or ()
    assert [d.cdi_device_ids for d in gpus] == [
        ("gpu.example.com/gpu=gpu-0",),
        ("gpu.example.com/gpu=gpu-1", "gpu.example.com/gpu=common"),
    ]


def test_an_empty_list_a_null_list_and_an_indented_document() -> None:
    assert decode_dra(vector_file("C1")).claims == ()
    assert decode_dra(vector_file("C2")).claims is None
    assert decode_dra(vector_file("C9")) == DRACheckpointData(())
    assert encode_dra(decode_dra(vector_file("C9"))) == C1_FILE


# ---------------------------------------------------------------------------------------------------------
# The v1.31 Entries key, the pre-1.31 format, bad files


def test_the_entries_form_reads_as_the_current_one() -> None:
    assert decode_dra(vector_file("C5")) == decode_dra(vector_file("C3"))
    assert decode_dra(vector_file("C5-C4")) == decode_dra(vector_file("C4"))
    assert encode_dra(decode_dra(vector_file("C5"))) == vector_file("C6")
    assert decode_dra_unverified(vector_file("C5")).list_key == "Entries"
    assert decode_dra_unverified(vector_file("C3")).list_key == "ClaimInfoStateList"
    (dup,) = decode_dra(vector_file("C5-dup")).claims or ()
    second = DRADevice("worker-1", "dev-2", C3_DEVICE.request_names, C3_DEVICE.cdi_device_ids)
    assert dup.driver_state == {"test-driver.cdi.k8s.io": (C3_DEVICE, second)}


def test_claim_info_state_list_wins_over_entries_either_way_round() -> None:
    c4_claims = C4[len(HEAD) :]
    both = HEAD + '[],"Entries":' + c4_claims
    assert decode_dra(_file_of(both)).claims == ()
    entries_first = entries_form(C4)[:-1] + ',"ClaimInfoStateList":null}'
    assert decode_dra(_file_of(entries_first)).claims is None
    neither = '{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1"}'
    assert decode_dra(_file_of(neither)).claims is None
    assert decode_dra_unverified(_file_of(neither)).list_key is None


def test_the_upstream_negative_vector_is_corrupt() -> None:
    raw = whole_file(entries_form(C4), 2930258365)
    with pytest.raises(CorruptDRACheckpointError) as err:
        decode_dra(raw)
    assert str(err.value) == "checkpoint is corrupted"
    assert isinstance(err.value, CorruptCheckpointError)
    assert (err.value.found, err.value.expected) == (2930258365, 3633532417)
    found = decode_dra_unverified(raw)
    assert not found.valid and found.computed_checksum == 3633532417
    assert found.data == decode_dra(vector_file("C4"))


def test_a_changed_byte_in_data_is_corrupt_even_where_json_does_not_care() -> None:
    inner, checksum = VECTORS["C1"]
    with pytest.raises(CorruptDRACheckpointError, match=r"^checkpoint is corrupted$"):
        decode_dra(whole_file(inner.replace(",", ", "), checksum))


def test_a_file_that_is_not_json_is_a_format_error() -> None:
    with pytest.raises(CheckpointFormatError) as err:
        decode_dra(b"{")
    assert "invalid JSON at line 1, column 2" in str(err.value)
    assert not isinstance(err.value, CorruptCheckpointError)


def test_the_pre_1_31_format_is_corrupt_with_the_same_text() -> None:
    d0 = (
        b'{"version":"v1","entries":[{"ClaimUID":"u","ClaimName":"c","Namespace":"n"}],"checksum":1288357193}'
    )
    assert is_dra_checkpoint(d0)  # the pre-1.31 shape is recognised, to be reported as corrupt
    with pytest.raises(CorruptDRACheckpointError) as err:
        decode_dra(d0)
    assert str(err.value) == "checkpoint is corrupted"
    assert (err.value.found, err.value.expected) == (1288357193, 0)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "the file is empty"),
        (b"null", "Data: invalid JSON: the string is empty"),
        (b'{"Data":"","Checksum":0}', "Data: invalid JSON: the string is empty"),
        (b"[]", "checkpoint: cannot decode array as an object"),
        (b'{"Data":{"PodDeviceEntries":null},"Checksum":1}', "Data: cannot decode object as a string"),
        (b'{"Data":"x","Checksum":4294967296}', "Checksum: cannot decode number 4294967296"),
        (b'{"Data":"x","Checksum":-1}', "Checksum: cannot decode number -1"),
        (b'{"Data":"x","Checksum":"1"}', "Checksum: cannot decode string"),
        (_file_of("{"), "Data: invalid JSON at line 1, column 2"),
        (_file_of("[]"), "Data: cannot decode array as an object"),
        (_file_of(HEAD + "{}}"), "Data.ClaimInfoStateList: cannot decode object as an array of claims"),
        (_file_of(HEAD + '[{"ClaimUID":5}]}'), "Data.ClaimInfoStateList[0].ClaimUID: cannot decode number 5"),
        (_file_of(HEAD + '[{"PodUIDs":{"p":1}}]}'), "Data.ClaimInfoStateList[0].PodUIDs['p']: cannot decode"),
        (
            _file_of(HEAD + '[{"DriverState":{"d":[]}}]}'),
            "DriverState['d']: cannot decode array as an object",
        ),
        (
            _file_of(HEAD + '[{"DriverState":{"d":{"Devices":[{"ShareID":true}]}}}]}'),
            "DriverState['d'].Devices[0].ShareID: cannot decode bool as a string",
        ),
        (_file_of(HEAD + '[{"DriverState":{"d":{"Devices":[{"RequestNames":"r"}]}}}]}'), "RequestNames"),
        (_file_of('{"kind":1}'), "Data.kind: cannot decode number 1 as a string"),
    ],
)
def test_bad_documents_are_one_line_format_errors(raw: bytes, words: str) -> None:
    with pytest.raises(CheckpointFormatError) as err:
        decode_dra(raw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_go_reading_rules() -> None:
    # Outer and inner keys match case-insensitively; unknown keys are skipped; null leaves a string alone.
    inner = (
        '{"KIND":"DRACheckpoint","claiminfostatelist":[{"claimuid":"u","ClaimName":"c","Namespace":null,'
        '"Extra":{"x":[1]},"podUIDs":{"p":{"ignored":1},"q":null},"DriverState":{"d":null,'
        '"e":{"devices":[{"poolname":"pool","DeviceName":"dev","Future":true,"ShareID":"s"}]}}}]}'
    )
    checksum = zlib.crc32(inner.encode())
    raw = ('{"data":' + json.dumps(inner) + f',"CHECKSUM":{checksum},"extra":[null]}}').encode()
    assert is_dra_checkpoint(raw)
    (claim,) = decode_dra(raw).claims or ()
    assert claim == ClaimInfoState(
        "u", "c", "", frozenset({"p", "q"}), {"d": None, "e": (DRADevice("pool", "dev", None, None, "s"),)}
    )


def test_a_repeated_key_is_decoded_again_in_place() -> None:
    inner = (
        HEAD + '[{"ClaimName":"c","PodUIDs":{"a":{}},"DriverState":{"d":{"Devices":[{"PoolName":"p"}]}}}],'
        '"ClaimInfoStateList":[{"PodUIDs":{"b":{}},"DriverState":{"e":{"Devices":null}},'
        '"ClaimUID":"u"}]}'
    )
    (claim,) = decode_dra(_file_of(inner)).claims or ()
    # The slice element is reused (its name kept), the set and the map keep their entries.
    assert claim == ClaimInfoState(
        "u", "c", "", frozenset({"a", "b"}), {"d": (DRADevice("p", ""),), "e": None}
    )


def test_an_escaped_lone_surrogate_becomes_u_fffd_as_in_go() -> None:
    inner = HEAD + '[{"ClaimName":"a\\ud800b"}]}'
    checksum = zlib.crc32(inner.encode())
    (claim,) = decode_dra(whole_file(inner, checksum)).claims or ()
    assert claim.claim_name == "a\ufffdb"


def test_is_dra_checkpoint_looks_at_the_content() -> None:
    for name in VECTORS:
        assert is_dra_checkpoint(vector_file(name))
    assert not is_dra_checkpoint(encode(CheckpointData(None, {"example.com/gpu": ["a"]})))
    for raw in (b"", b"{", b"null", b"[]", b'{"Data":1}', b'{"Data":null}', b'{"entries":[]}', b"\xff"):
        assert not is_dra_checkpoint(raw)


def test_claims_are_written_sorted_by_namespace_and_name() -> None:
    claims = [
        ClaimInfoState(f"uid-{ns}-{name}", name, ns, frozenset(), {})
        for ns, name in [("b", "a"), ("a", "z"), ("a", "b"), ("a-b", "a"), ("ab", "a")]
    ]
    written = encode_dra(DRACheckpointData(tuple(claims)))
    decoded = decode_dra(written).claims or ()
    assert [c.key for c in decoded] == ["a-b/a", "a/b", "a/z", "ab/a", "b/a"]
    random.Random(7).shuffle(claims)
    assert encode_dra(DRACheckpointData(tuple(claims))) == written


# ---------------------------------------------------------------------------------------------------------
# Arbitrary data


_TEXT = st.text(
    st.one_of(
        st.sampled_from('<>&\u2028\u2029"\\/\n\t\x00\x7f\u00e9\u4e2d\U0001f600'), st.characters(codec="utf-8")
    ),
    max_size=12,
)
_DEVICE = st.builds(
    DRADevice,
    _TEXT,
    _TEXT,
    st.none() | st.lists(_TEXT, max_size=3).map(tuple),
    st.none() | st.lists(_TEXT, max_size=3).map(tuple),
    st.none() | _TEXT,
)
_CLAIM = st.builds(
    ClaimInfoState,
    _TEXT,
    _TEXT,
    _TEXT,
    st.none() | st.frozensets(_TEXT, max_size=3),
    st.none()
    | st.dictionaries(_TEXT, st.none() | st.lists(_DEVICE, max_size=3).map(tuple), max_size=3).map(
        lambda drivers: dict(sorted(drivers.items()))
    ),
)


def _sorted_claims(claims: list[ClaimInfoState]) -> tuple[ClaimInfoState, ...]:
    unique = {c.key: c for c in claims}
    return tuple(unique[key] for key in sorted(unique))


_DATA = st.builds(DRACheckpointData, st.none() | st.lists(_CLAIM, max_size=4).map(_sorted_claims))


@settings(max_examples=200, deadline=None)
@given(_DATA)
def test_any_data_round_trips_with_go_escapes(data: DRACheckpointData) -> None:
    raw = encode_dra(data)
    assert decode_dra(raw) == data
    # Go escapes these in the inner text; the outer escaping then doubles the backslash.
    for char in "<>&\u2028\u2029":
        assert char.encode() not in raw
    outer = json.loads(raw)
    inner = outer["Data"]
    assert outer["Checksum"] == zlib.crc32(inner.encode())
    assert raw == whole_file(inner, outer["Checksum"])
    names = [c.claim_name for c in data.claims or ()]
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028")):
        if any(char in name for name in names):
            assert escape in inner
    assert "\\u0000" in inner or not any("\x00" in name for name in names)
    assert json.loads(inner)["ClaimInfoStateList"] == (
        None if data.claims is None else [json.loads(json.dumps(_as_go(c))) for c in data.claims]
    )


def _as_go(claim: ClaimInfoState) -> dict[str, object]:
    """The claim as Go's structs would marshal it, built independently of the encoder."""

    def device(d: DRADevice) -> dict[str, object]:
        return {
            "PoolName": d.pool_name,
            "DeviceName": d.device_name,
            "ShareID": d.share_id,
            "RequestNames": None if d.request_names is None else list(d.request_names),
            "CDIDeviceIDs": None if d.cdi_device_ids is None else list(d.cdi_device_ids),
        }

    drivers = claim.driver_state
    return {
        "ClaimUID": claim.claim_uid,
        "ClaimName": claim.claim_name,
        "Namespace": claim.namespace,
        "PodUIDs": None if claim.pod_uids is None else {uid: {} for uid in claim.pod_uids},
        "DriverState": None
        if drivers is None
        else {
            name: {"Devices": None if devices is None else [device(d) for d in devices]}
            for name, devices in drivers.items()
        },
    }
