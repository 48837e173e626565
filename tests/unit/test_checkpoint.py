"""The checkpoint codec and checksum against real kubelet files and Go's encoding/json rules."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kubedevice.checkpoint import (
    CheckpointData,
    CheckpointError,
    CheckpointFormatError,
    CorruptCheckpointError,
    PodDevicesEntry,
    checksum,
    decode,
    decode_unverified,
    encode,
    spew_text,
)

# Copies of the project's shared test vectors: real kubelet files and Go-generated ones.
TESTDATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"


def _real() -> list[bytes]:
    return [line for line in (TESTDATA / "real.jsonl").read_bytes().splitlines() if line.strip()]


def _generated() -> dict[str, bytes]:
    rows = (TESTDATA / "go_generated.tsv").read_bytes().splitlines()
    return {name.decode(): blob for name, blob in (row.split(b"\t", 1) for row in rows if row.strip())}


def _checksum_in(line: bytes) -> int:
    return int(json.loads(line)["Checksum"])


REAL = _real()
GENERATED = _generated()
V2_VECTORS = REAL + [blob for name, blob in GENERATED.items() if name.startswith("v2-")]

# The text a real kubelet hashed for the "tegra" file.
TEGRA_SPEW = (
    "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)"
    "bf52b2cd-b611-4e79-86b1-280b283185c3 ContainerName:(string)check ResourceName:(string)nvidia.com/gpu "
    "DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[tegra]] "
    "AllocResp:([]uint8)[10 31 10 22 78 86 73 68 73 65 95 86 73 83 73 66 76 69 95 68 69 86 73 67 69 83 "
    "18 5 116 101 103 114 97]}] "
    "RegisteredDevices:(map[string][]string)map[nvidia.com/gpu:[tegra]]}"
)


def _one(**overrides: object) -> CheckpointData:
    fields: dict[str, object] = {
        "pod_uid": "pod1",
        "container_name": "con1",
        "resource_name": "example.com/dev",
        "device_ids": {0: ["dev0"]},
        "alloc_resp": b"",
    }
    fields.update(overrides)
    return CheckpointData([PodDevicesEntry(**fields)], {"example.com/dev": ["dev0"]})  # type: ignore[arg-type]


def _with_checksum(data_json: str, data: CheckpointData) -> bytes:
    """A file whose Data is written by hand and whose checksum is that of ``data``."""
    return f'{{"Data":{data_json},"Checksum":{checksum(data)}}}'.encode()


# ---------------------------------------------------------------------------------------------------------
# The vectors


def test_all_vectors_are_present() -> None:
    assert len(REAL) == 4
    assert set(GENERATED) == {
        "v2-empty-nil",
        "v2-empty-emptyslice",
        "v2-nilmap",
        "v2-reg-emptylist",
        "v2-multinuma",
        "v1-basic",
    }


@pytest.mark.parametrize("line", V2_VECTORS, ids=lambda line: str(_checksum_in(line)))
def test_v2_vector_verifies_and_reencodes_byte_for_byte(line: bytes) -> None:
    decoded = decode(line)
    assert decoded.format_version == 2
    assert decoded.checksum == _checksum_in(line)
    assert checksum(decoded.data) == decoded.checksum
    assert encode(decoded.data) == line


def test_tegra_spew_text_is_exactly_what_the_kubelet_hashed() -> None:
    tegra = next(line for line in REAL if b"tegra" in line)
    data = decode(tegra).data
    assert spew_text(data) == TEGRA_SPEW.encode()
    assert checksum(data) == 3660592824


def test_multinuma_vector_keeps_nil_and_empty_apart() -> None:
    data = decode(GENERATED["v2-multinuma"]).data
    assert data.pod_device_entries is not None
    first, second = data.pod_device_entries
    assert first.device_ids == {-1: ["dev9"], 0: ["dev0"], 10: ["dev3"], 2: ["dev1", "dev2"]}
    assert first.alloc_resp == b""
    assert second.container_name == "cé<&>"
    assert second.device_ids is None and second.alloc_resp is None
    # Registered lists keep their order: the checksum covers them as written.
    assert data.registered_devices is not None
    assert data.registered_devices["domain2.com/r"] == ["b", "a"]
    text = spew_text(data).decode()
    assert "DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[dev9] 0:[dev0] 2:[dev1 dev2] 10:[dev3]]" in text
    assert "AllocResp:([]uint8)[]}" in text
    assert "DeviceIDs:(checkpoint.DevicesPerNUMA)<nil> AllocResp:([]uint8)<nil>}" in text


@pytest.mark.parametrize(
    ("name", "entries", "registered"),
    [
        ("v2-empty-nil", None, {}),
        ("v2-empty-emptyslice", [], {}),
        ("v2-nilmap", None, None),
        ("v2-reg-emptylist", None, {"a.com/b": ["x"], "example.com/foo": []}),
    ],
)
def test_nil_versus_empty_decodes_and_hashes_apart(
    name: str, entries: list[PodDevicesEntry] | None, registered: dict[str, list[str]] | None
) -> None:
    data = CheckpointData(entries, registered)
    assert decode(GENERATED[name]).data == data
    assert checksum(data) == _checksum_in(GENERATED[name])


def test_spew_text_of_nil_and_empty() -> None:
    head = "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)"
    assert (
        spew_text(CheckpointData(None, None))
        == (head + "<nil> RegisteredDevices:(map[string][]string)<nil>}").encode()
    )
    assert (
        spew_text(CheckpointData([], {"r": []}))
        == (head + "[] RegisteredDevices:(map[string][]string)map[r:[]]}").encode()
    )


def test_v1_vector_falls_back_and_moves_devices_to_numa_zero() -> None:
    line = GENERATED["v1-basic"]
    decoded = decode(line)
    assert decoded.format_version == 1
    assert decoded.checksum == 3105977469
    assert decoded.data == CheckpointData(
        [
            PodDevicesEntry(
                "pod1", "con1", "domain1.com/resource1", {0: ["dev1", "dev2"]}, base64.b64decode("CgMKAWE=")
            )
        ],
        {"domain1.com/resource1": ["dev1", "dev2", "dev3"]},
    )
    # The v1 text of the converted data is what k8s 1.19 hashed.
    assert checksum(decoded.data, v1=True) == 3105977469
    assert b"DeviceIDs:([]string)[dev1 dev2]" in spew_text(decoded.data, v1=True)
    # The next write is v2 and verifies as v2.
    migrated = decode(encode(decoded.data))
    assert migrated.format_version == 2
    assert migrated.data == decoded.data


def test_v1_file_with_a_bad_checksum_reports_the_v2_error() -> None:
    line = GENERATED["v1-basic"].replace(b"3105977469", b"3105977460")
    with pytest.raises(CheckpointFormatError) as err:
        decode(line)
    assert "Data.PodDeviceEntries[0].DeviceIDs" in str(err.value)
    assert "array" in str(err.value)


def test_v1_file_without_entries_converts_to_nil_entries() -> None:
    # No entries hash the same in v1 and v2, so this file verifies as v2 already.
    line = b'{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}},"Checksum":2932075448}'
    assert decode(line).format_version == 2


# ---------------------------------------------------------------------------------------------------------
# The writer: Go's encoding/json


def test_encode_escapes_like_go() -> None:
    name = 'a\bb\fc\n\t\r"\\<>&\u2028\u2029\x7f\x01\x1fé😀'
    blob = encode(_one(container_name=name))
    expected = (
        '"ContainerName":"a\\u0008b\\u000cc\\n\\t\\r\\"\\\\'
        '\\u003c\\u003e\\u0026\\u2028\\u2029\x7f\\u0001\\u001fé😀"'
    )
    assert expected.encode() in blob
    assert decode(blob).data == _one(container_name=name)


def test_encode_has_go_key_order_and_no_whitespace() -> None:
    data = CheckpointData(
        [PodDevicesEntry("u", "c", "r", {2: ["b"], 10: ["c"], -1: ["a"], 0: []}, b"\x00\xff")],
        {"z.io/x": [], "a.io/y": ["1"]},
    )
    blob = encode(data)
    assert (
        blob
        == (
            '{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r",'
            '"DeviceIDs":{"-1":["a"],"0":[],"10":["c"],"2":["b"]},"AllocResp":"AP8="}],'
            f'"RegisteredDevices":{{"a.io/y":["1"],"z.io/x":[]}}}},"Checksum":{checksum(data)}}}'
        ).encode()
    )
    assert not blob.endswith(b"\n")


def test_spew_prints_strings_raw_and_keys_sorted() -> None:
    data = CheckpointData(
        [PodDevicesEntry("p d", "c]", "r:x", {10: ["a b"], -1: [], 2: ["\n"]}, b"\x00\x0a\xff")],
        {"b": ["x"], "B": [], "a": ["é"]},
    )
    text = spew_text(data).decode()
    assert "{PodUID:(string)p d ContainerName:(string)c] ResourceName:(string)r:x " in text
    assert "DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[] 2:[\n] 10:[a b]]" in text
    assert "AllocResp:([]uint8)[0 10 255]" in text
    assert text.endswith("RegisteredDevices:(map[string][]string)map[B:[] a:[é] b:[x]]}")


def test_lone_surrogate_is_written_as_replacement_character_and_still_verifies() -> None:
    blob = encode(_one(pod_uid="a\ud800b"))
    assert "a\ufffdb".encode() in blob
    assert decode(blob).data == _one(pod_uid="a\ufffdb")


# ---------------------------------------------------------------------------------------------------------
# The reader: what Go's encoding/json accepts


def test_keys_match_case_insensitively_and_unknown_fields_are_ignored() -> None:
    tegra = next(line for line in REAL if b"tegra" in line).decode()
    mangled = (
        tegra.replace('"Data"', '"data"')
        .replace('"PodDeviceEntries"', '"PODDEVICEENTRIES"')
        .replace('"PodUID"', '"poduid"')
        .replace('"DeviceIDs"', '"deviceIds"')
        .replace('"Checksum"', '"Chec\u212asum"')  # Go folds the Kelvin sign onto k
        .replace('"AllocResp"', '"AllDevices":{"x":[1]},"AllocResp"')
    )
    decoded = decode(mangled.encode())
    assert decoded.checksum == 3660592824
    assert spew_text(decoded.data) == TEGRA_SPEW.encode()


def test_exact_key_wins_over_a_folded_one_only_by_document_order() -> None:
    data = _one(pod_uid="right")
    entry = '"podUID":"wrong","PodUID":"right","ContainerName":"con1","ResourceName":"example.com/dev"'
    blob = _with_checksum(
        f'{{"PodDeviceEntries":[{{{entry},"DeviceIDs":{{"0":["dev0"]}},"AllocResp":""}}],'
        '"RegisteredDevices":{"example.com/dev":["dev0"]}}',
        data,
    )
    assert decode(blob).data == data


def test_absent_fields_take_the_kubelets_initial_values() -> None:
    # The kubelet decodes into an empty slice and an empty map: absent is [] and {}, not null.
    empty = CheckpointData([], {})
    assert decode(f'{{"Checksum":{checksum(empty)}}}'.encode()).data == empty
    assert decode(f'{{"Data":null,"Checksum":{checksum(empty)}}}'.encode()).data == empty
    entry = CheckpointData([PodDevicesEntry("", "", "", None, None)], {})
    assert decode(_with_checksum('{"PodDeviceEntries":[{}]}', entry)).data == entry
    assert decode(_with_checksum('{"PodDeviceEntries":[null]}', entry)).data == entry
    nulls = '{"PodUID":null,"ContainerName":null,"ResourceName":null,"DeviceIDs":null,"AllocResp":null}'
    assert decode(_with_checksum(f'{{"PodDeviceEntries":[{nulls}]}}', entry)).data == entry


def test_missing_checksum_is_zero_and_mismatches() -> None:
    with pytest.raises(CorruptCheckpointError) as err:
        decode(b'{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}}}')
    assert err.value.found == 0
    assert err.value.expected == 3467439661
    assert str(err.value) == "checksum mismatch: file says 0, content hashes to 3467439661"


def test_null_document_decodes_to_initial_values_and_mismatches() -> None:
    with pytest.raises(CorruptCheckpointError) as err:
        decode(b"null")
    assert err.value.expected == checksum(CheckpointData([], {}))


def test_flipped_checksum_is_corrupt() -> None:
    line = REAL[0].replace(b"2530956716", b"2530956717")
    with pytest.raises(CorruptCheckpointError) as err:
        decode(line)
    assert (err.value.found, err.value.expected) == (2530956717, 2530956716)
    unverified = decode_unverified(line)
    assert not unverified.valid
    assert unverified.computed_checksum == 2530956716
    assert unverified.decoded.data == decode(REAL[0]).data


def test_changed_content_is_corrupt() -> None:
    with pytest.raises(CorruptCheckpointError):
        decode(REAL[0].replace(b'"app"', b'"apq"'))


def test_numa_keys_parse_like_go_parseint() -> None:
    data = _one(device_ids={1: ["a"], -3: ["b"]})
    for one, minus_three in (("1", "-3"), ("+1", "-03"), ("0001", "-3")):
        blob = _with_checksum(
            '{"PodDeviceEntries":[{"PodUID":"pod1","ContainerName":"con1","ResourceName":"example.com/dev",'
            f'"DeviceIDs":{{"{one}":["a"],"{minus_three}":["b"]}},"AllocResp":""}}],'
            '"RegisteredDevices":{"example.com/dev":["dev0"]}}',
            data,
        )
        assert decode(blob).data == data


def test_maps_merge_and_null_elements_keep_zero_values_like_go() -> None:
    data = CheckpointData([], {"a": [], "b": ["x", ""]})
    blob = _with_checksum('{"RegisteredDevices":{"a":[]},"RegisteredDevices":{"b":["x",null]}}', data)
    assert decode(blob).data == data


def test_alloc_resp_base64_rules() -> None:
    for text, raw in (('"QQ=="', b"A"), ('"Q\\nQ=="', b"A"), ('""', b""), ("[65,0,255]", b"A\x00\xff")):
        data = _one(alloc_resp=raw)
        blob = _with_checksum(
            '{"PodDeviceEntries":[{"PodUID":"pod1","ContainerName":"con1","ResourceName":"example.com/dev",'
            f'"DeviceIDs":{{"0":["dev0"]}},"AllocResp":{text}}}],"RegisteredDevices":{{"example.com/dev":["dev0"]}}}}',
            data,
        )
        assert decode(blob).data == data


def test_escaped_lone_surrogate_reads_as_replacement_character() -> None:
    data = CheckpointData([], {"r": ["a\ufffd"]})
    assert decode(_with_checksum('{"RegisteredDevices":{"r":["a\\ud800"]}}', data)).data == data


def _entry_file(field: str, value: str) -> bytes:
    fields = {
        "PodUID": '"p"',
        "ContainerName": '"c"',
        "ResourceName": '"r"',
        "DeviceIDs": '{"0":["d"]}',
        "AllocResp": '""',
    }
    fields[field] = value
    entry = "{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}"
    return ('{"Data":{"PodDeviceEntries":[' + entry + '],"RegisteredDevices":{}},"Checksum":1}').encode()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("PodUID", "7", ["Data.PodDeviceEntries[0].PodUID", "number 7", "string"]),
        ("ContainerName", "true", ["Data.PodDeviceEntries[0].ContainerName", "bool"]),
        ("ResourceName", "{}", ["Data.PodDeviceEntries[0].ResourceName", "object"]),
        ("DeviceIDs", '{"x":["d"]}', ["Data.PodDeviceEntries[0].DeviceIDs", "NUMA node 'x'"]),
        ("DeviceIDs", '{"9223372036854775808":[]}', ["NUMA node '9223372036854775808'"]),
        ("DeviceIDs", '{"1_0":[]}', ["NUMA node '1_0'"]),
        ("DeviceIDs", '{"0":"d"}', ["Data.PodDeviceEntries[0].DeviceIDs['0']", "array of strings"]),
        ("DeviceIDs", '{"0":[1]}', ["Data.PodDeviceEntries[0].DeviceIDs['0'][0]", "number 1"]),
        ("AllocResp", '"!!!!"', ["Data.PodDeviceEntries[0].AllocResp", "invalid base64"]),
        ("AllocResp", '"QQ"', ["AllocResp", "invalid base64"]),
        ("AllocResp", '"QUJD="', ["AllocResp", "invalid base64"]),
        ("AllocResp", '"é"', ["AllocResp", "invalid base64"]),
        ("AllocResp", "[256]", ["Data.PodDeviceEntries[0].AllocResp[0]", "number 256", "8-bit"]),
        ("AllocResp", "12", ["AllocResp", "base64 string"]),
    ],
)
def test_type_errors_name_the_field(field: str, value: str, words: list[str]) -> None:
    with pytest.raises(CheckpointFormatError) as err:
        decode(_entry_file(field, value))
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("blob", "words"),
    [
        (b"", ["empty"]),
        (b"   ", ["line 1, column 4"]),
        (b'{"Data":{"PodDeviceEntries":[', ["invalid JSON", "line 1"]),
        (b'{"Data":\n  {,}}', ["invalid JSON at line 2, column 4"]),
        (b"garbage", ["invalid JSON at line 1, column 1"]),
        (b'{"Checksum":1} x', ["invalid JSON", "Extra data"]),
        (b'{"Data":{},\n"Checksum":1\xff}', ["invalid UTF-8 at line 2, column 13"]),
        (b"\xef\xbb\xbf{}", ["BOM"]),
        (b'{"Checksum":NaN}', ["NaN"]),
        (b"[" * 100_000 + b"]" * 100_000, ["nested too deeply"]),
        (b"[]", ["checkpoint", "array", "object"]),
        (b'{"Data":[]}', ["Data", "array", "object"]),
        (b'{"Data":{"PodDeviceEntries":{}}}', ["Data.PodDeviceEntries", "object", "array of entries"]),
        (b'{"Data":{"PodDeviceEntries":["x"]}}', ["Data.PodDeviceEntries[0]", "string"]),
        (b'{"Data":{"RegisteredDevices":[]}}', ["Data.RegisteredDevices", "array"]),
        (b'{"Data":{"RegisteredDevices":{"r":"d"}}}', ["Data.RegisteredDevices['r']", "string"]),
        (b'{"Checksum":"1"}', ["Checksum", "string", "unsigned 64-bit"]),
        (b'{"Checksum":-1}', ["Checksum", "number -1"]),
        (b'{"Checksum":1.0}', ["Checksum", "number 1.0"]),
        (b'{"Checksum":1e3}', ["Checksum", "number 1e3"]),
        (b'{"Checksum":18446744073709551616}', ["Checksum", "number 18446744073709551616"]),
        (b'{"Checksum":' + b"9" * 5000 + b"}", ["Checksum", "..."]),
    ],
)
def test_bad_bytes_give_a_one_line_format_error(blob: bytes, words: list[str]) -> None:
    with pytest.raises(CheckpointFormatError) as err:
        decode(blob)
    message = str(err.value)
    assert "\n" not in message and len(message) < 300
    for word in words:
        assert word in message
    with pytest.raises(CheckpointFormatError):
        decode_unverified(blob)


def test_largest_checksum_is_a_mismatch_not_an_error() -> None:
    with pytest.raises(CorruptCheckpointError) as err:
        decode(b'{"Checksum":18446744073709551615}')
    assert err.value.found == 2**64 - 1


def test_every_error_is_a_checkpoint_error() -> None:
    assert issubclass(CheckpointFormatError, CheckpointError)
    assert issubclass(CorruptCheckpointError, CheckpointError)
