"""Entries of the exact shape the kubelet writes are decoded without the general walk; whatever the shape,
the result is the walk's. The walk is forced with scrub=True (which only changes strings holding an
escaped lone surrogate, and none here does)."""

from __future__ import annotations

import json

import pytest

from kubedevice.checkpoint.decode import _public, _raw_spew
from kubedevice.checkpoint.errors import CheckpointFormatError
from kubedevice.checkpoint.json_reader import Decoder, parse_json
from kubedevice.checkpoint.model import DecodedCheckpoint

KUBELET = {
    "PodUID": "uid-1",
    "ContainerName": "main",
    "ResourceName": "example.com/gpu",
    "DeviceIDs": {"0": ["a", "b"], "1": ["c"]},
    "AllocResp": "CgQKAkFCEgA=",
}


def _document(*entries: object) -> bytes:
    return json.dumps({"Data": {"PodDeviceEntries": list(entries), "RegisteredDevices": {}}}).encode()


def _decoded(raw: bytes, walk: bool) -> tuple[DecodedCheckpoint, bytes] | str:
    """What a read gives (the entries, and the text the checksum is computed over), or the error."""
    doc, _scrub = parse_json(raw)
    try:
        decoded = Decoder(v1=False, scrub=walk).checkpoint(doc)
    except CheckpointFormatError as err:
        return str(err)
    return _public(decoded, 2), _raw_spew(decoded, v1=False)


@pytest.mark.parametrize(
    "entry",
    [
        KUBELET,
        {**KUBELET, "DeviceIDs": {"01": ["a"]}},  # leading zero
        {**KUBELET, "DeviceIDs": {"-1": ["a"]}},  # sign
        {**KUBELET, "DeviceIDs": {"99999999999999999999": ["a"]}},  # beyond 64 bits
        {**KUBELET, "DeviceIDs": {"x": ["a"]}},
        {**KUBELET, "DeviceIDs": {"0": None, "0 ": ["a"]}},
        {**KUBELET, "DeviceIDs": {"0": ["a", 7]}},
        {**KUBELET, "DeviceIDs": None},
        {**KUBELET, "AllocResp": "CgQKAkFC\nEgA="},  # Go's reader skips line breaks
        {**KUBELET, "AllocResp": "CgQKAkFCEgA"},  # no padding
        {**KUBELET, "AllocResp": "CgQK*kFCEgA="},
        {**KUBELET, "AllocResp": [1, 2, None]},
        {**KUBELET, "AllocResp": None},
        {**KUBELET, "PodUID": 5},
        {**KUBELET, "PodUID": None},
        {"podUID": "u", **{k: v for k, v in KUBELET.items() if k != "PodUID"}},  # case folded, other order
        {k: v for k, v in KUBELET.items() if k != "AllocResp"},
        {**KUBELET, "Extra": 1},
    ],
)
def test_the_fast_path_decodes_what_the_walk_decodes(entry: dict[str, object]) -> None:
    raw = _document(entry, KUBELET)
    assert _decoded(raw, walk=False) == _decoded(raw, walk=True)


def test_an_entries_list_given_twice_reuses_its_entries_as_go_does() -> None:
    first = {**KUBELET, "DeviceIDs": {"0": ["a"]}}
    raw = (
        b'{"Data": {"PodDeviceEntries": ['
        + json.dumps(first).encode()
        + b'], "PodDeviceEntries": ['
        + json.dumps({**KUBELET, "DeviceIDs": {"1": ["z"]}}).encode()
        + b"]}}"
    )
    fast = _decoded(raw, walk=False)
    assert fast == _decoded(raw, walk=True)
    assert not isinstance(fast, str)
    entries = fast[0].data.pod_device_entries
    assert entries is not None
    assert entries[0].device_ids == {0: ["a"], 1: ["z"]}


def test_only_the_kubelet_shape_skips_the_walk() -> None:
    doc, _scrub = parse_json(_document(KUBELET, {**KUBELET, "DeviceIDs": {"01": ["a"]}}))
    entries = Decoder(v1=False, scrub=False).checkpoint(doc).entries
    assert entries is not None
    assert [type(e).__name__ for e in entries] == ["PodDevicesEntry", "_RawEntry"]
