"""`kubedevice checkpoint inspect|verify` on the DRA manager's checkpoint (`dra_manager_state`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from kubedevice.checkpoint import ClaimInfoState, DRACheckpointData, DRACheckpointStore, DRADevice
from tests.dra_vectors import VECTORS, vector_file, whole_file

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")


def _valid_file(inner: str) -> bytes:
    """A file whose checksum holds for this Data string."""
    return whole_file(inner, zlib.crc32(inner.encode()))


C4_CHECKSUM_1 = vector_file("C4").replace(b'"Checksum":1582256999', b'"Checksum":1')


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # A wide terminal keeps rich from folding the table cells the assertions look for.
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run(
        [KUBEDEVICE, "checkpoint", *args], capture_output=True, text=True, env=env, timeout=60
    )


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _file(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "dra_manager_state"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_every_vector_written_verbatim_verifies(tmp_path: Path, name: str) -> None:
    done = run("verify", str(_file(tmp_path, vector_file(name))))
    assert done.returncode == 0, done.stderr
    inner, checksum = VECTORS[name]
    claims = len(json.loads(inner).get("ClaimInfoStateList") or json.loads(inner).get("Entries") or [])
    key = "Entries (v1.31)" if name.startswith("C5") else "ClaimInfoStateList"
    assert done.stdout == f"OK: checksum {checksum}, {claims} claims, DRA checkpoint, {key}\n"
    assert done.stderr == ""


def test_verify_of_c4_with_checksum_1_is_exit_1_with_the_kubelet_text(tmp_path: Path) -> None:
    path = _file(tmp_path, C4_CHECKSUM_1)
    done = run("verify", str(path))
    assert done.returncode == 1
    assert done.stdout == ""
    assert _one_error_line(done) == (
        f"error: checkpoint verify: {path}: checkpoint is corrupted:"
        " file says 1, the CRC-32 of Data is 1582256999"
    )
    assert path.read_bytes() == C4_CHECKSUM_1


def test_verify_of_the_pre_1_31_format_is_corrupt(tmp_path: Path) -> None:
    path = _file(tmp_path, b'{"version":"v1","entries":[],"checksum":5}')
    done = run("verify", str(path))
    assert done.returncode == 1
    assert _one_error_line(done).endswith(": checkpoint is corrupted: file says 5, the CRC-32 of Data is 0")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (_valid_file("{"), "Data: invalid JSON at line 1, column 2"),
        (_valid_file("[]"), "Data: cannot decode array as an object"),
        (b'{"Data":"{}","Checksum":4294967296}', "Checksum: cannot decode number 4294967296"),
    ],
)
def test_verify_of_a_bad_dra_document_is_exit_1(tmp_path: Path, content: bytes, words: str) -> None:
    done = run("verify", str(_file(tmp_path, content)))
    assert done.returncode == 1
    assert words in _one_error_line(done)


def test_verify_of_an_unreadable_path_is_exit_2(tmp_path: Path) -> None:
    missing = run("verify", str(tmp_path / "dra_manager_state"))
    assert missing.returncode == 2
    assert "checkpoint is not found" in _one_error_line(missing)
    directory = tmp_path / "dir"
    directory.mkdir()
    done = run("verify", str(directory))
    assert done.returncode == 2
    assert "not a regular file (a directory)" in _one_error_line(done)


def test_a_file_written_by_the_store_verifies(tmp_path: Path) -> None:
    store = DRACheckpointStore(tmp_path)
    store.read_or_create()
    assert (
        run("verify", str(store.path)).stdout
        == "OK: checksum 4010664294, 0 claims, DRA checkpoint, ClaimInfoStateList\n"
    )


# ---------------------------------------------------------------------------------------------------------
# inspect


def test_inspect_prints_a_claims_devices(tmp_path: Path) -> None:
    done = run("inspect", str(_file(tmp_path, vector_file("C7"))))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for text in (
        "checksum 2697487707 (CRC-32): valid",
        "ml/shared-gpu",
        "a1b2c3d4-0000-4000-8000-000000000001",
        "pod-a",
        "pod-b",
        "gpu.example.com",
        "node-1/gpu-0",
        "node-1/gpu-1",
        "requests: gpu",
        "cdi: gpu.example.com/gpu=gpu-0",
        "cdi: gpu.example.com/gpu=gpu-1",
        "cdi: gpu.example.com/gpu=common",
        "nic.example.com",
    ):
        assert text in out, text


def test_inspect_shows_a_share_id_and_markup_literally(tmp_path: Path) -> None:
    device = DRADevice("[red]pool", "eth1", None, ("nic.example.com/vf=eth1-3",), "share-0f2d")
    claim = ClaimInfoState("uid-1", "[bold]c", "default", frozenset({"p1"}), {"nic.example.com": (device,)})
    store = DRACheckpointStore(tmp_path)
    store.write(DRACheckpointData((claim,)))
    done = run("inspect", str(store.path))
    assert done.returncode == 0, done.stderr
    for text in ("default/[bold]c", "[red]pool/eth1", "share: share-0f2d", "cdi: nic.example.com/vf=eth1-3"):
        assert text in done.stdout, text


def test_inspect_json(tmp_path: Path) -> None:
    path = _file(tmp_path, vector_file("C8"))
    done = run("inspect", "--json", str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "path": str(path),
        "format": "dra_manager_state",
        "listKey": "ClaimInfoStateList",
        "checksum": {"found": 2085975979, "computed": 2085975979, "valid": True},
        "claims": [
            {
                "namespace": "default",
                "name": "cap<share>&",
                "uid": "5d6c8a0e-2f4b-4c1d-9e7a-0b1c2d3e4f50",
                "podUIDs": ["p1"],
                "drivers": {
                    "nic.example.com": [
                        {
                            "pool": "node-1",
                            "device": "eth1",
                            "requestNames": None,
                            "cdiDeviceIDs": ["nic.example.com/vf=eth1-3"],
                            "shareID": "0f2d4c6e-8a0b-4c2d-9e1f-3a5b7c9d1e2f",
                        }
                    ]
                },
            }
        ],
    }


def test_inspect_json_of_a_null_list_and_of_the_entries_form(tmp_path: Path) -> None:
    report = json.loads(run("inspect", "--json", str(_file(tmp_path, vector_file("C2")))).stdout)
    assert report["claims"] is None and report["listKey"] == "ClaimInfoStateList"
    report = json.loads(run("inspect", "--json", str(_file(tmp_path, vector_file("C5")))).stdout)
    assert report["listKey"] == "Entries" and report["claims"][0]["name"] == "example"


def test_inspect_of_a_corrupt_file_shows_the_content_and_exits_1(tmp_path: Path) -> None:
    path = _file(tmp_path, C4_CHECKSUM_1)
    done = run("inspect", "--json", str(path))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["checksum"] == {"found": 1, "computed": 1582256999, "valid": False}
    assert [c["name"] for c in report["claims"]] == ["example-1", "example-2"]
    table = run("inspect", str(path))
    assert table.returncode == 1
    assert "checksum INVALID: file says 1, the CRC-32 of Data is 1582256999" in table.stdout
    assert "default/example-2" in table.stdout


def test_inspect_of_an_undecodable_dra_document_is_exit_1_with_one_line(tmp_path: Path) -> None:
    done = run("inspect", str(_file(tmp_path, _valid_file("{"))))
    assert done.returncode == 1
    assert done.stdout == ""
    assert "Data: invalid JSON at line 1, column 2" in _one_error_line(done)
