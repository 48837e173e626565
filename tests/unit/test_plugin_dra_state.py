"""The SDK's DRA state file kept in memory: the same bytes as a whole encoding, read again only when the
file changed under the instance, and never trusted after a write that failed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kubedevice.plugin.dra.state import ClaimState, PreparedClaim, StateStore, load_state


def claim(name: str, device: str = "gpu-0", boot: str = "b1") -> PreparedClaim:
    return PreparedClaim(
        namespace="default",
        name=name,
        devices=({"request_names": ["gpu"], "pool_name": "node", "device_name": device},),
        cdi_spec_files=(f"/cdi/{name}.json",),
        boot_id=boot,
        cdi_specs={f"/cdi/{name}.json": {"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": []}},
    )


def whole(state: ClaimState) -> str:
    data = {"version": 1, "claims": {uid: e.to_json() for uid, e in state.claims.items()}}
    return json.dumps(data, sort_keys=True) + "\n"


def test_writes_the_bytes_of_a_whole_encoding_as_claims_come_and_go(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = StateStore(path)
    state = store.load()
    assert state.claims == {}
    store.save(state)
    assert path.read_text() == '{"claims": {}, "version": 1}\n'
    for uid, name in [("u2", "b"), ("u1", "a"), ("u3", "c\u00e9")]:
        state = store.load()
        state.claims[uid] = claim(name)
        store.save(state)
        assert path.read_text() == whole(state)
    state = store.load()
    state.claims["u1"] = claim("a", device="gpu-1")  # a changed entry is encoded again
    del state.claims["u2"]
    store.save(state)
    assert path.read_text() == whole(state)
    assert load_state(path).claims == state.claims


def test_a_change_by_another_writer_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    mine, twin = StateStore(path), StateStore(path)
    state = mine.load()
    state.claims["u1"] = claim("a")
    mine.save(state)
    theirs = twin.load()
    assert theirs.claims == state.claims
    del theirs.claims["u1"]
    theirs.claims["u2"] = claim("b")
    twin.save(theirs)
    assert set(mine.load().claims) == {"u2"}
    path.unlink()  # moved aside: an empty state, as a first read would find
    assert mine.load().claims == {}


def test_a_call_that_does_not_save_leaves_the_kept_state_alone(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.json")
    state = store.load()
    state.claims["u1"] = claim("a")
    assert store.load().claims == {}


def test_a_failed_write_leaves_the_kept_state_as_the_file_has_it(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = StateStore(path)
    state = store.load()
    state.claims["u1"] = claim("a")
    store.save(state)
    before = path.read_bytes()
    state = store.load()
    state.claims["u2"] = replace(claim("b"), devices=({"device_name": {"not", "json"}},))
    with pytest.raises(TypeError):
        store.save(state)
    assert path.read_bytes() == before
    assert set(store.load().claims) == {"u1"}
