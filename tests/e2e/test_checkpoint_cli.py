"""`kubedevice checkpoint inspect|verify` as a user runs them, on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint import CheckpointData, CheckpointStore, PodDevicesEntry

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")

# Copies of the project's shared test vectors: real kubelet files and Go-generated ones.
TESTDATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"


def _vectors() -> dict[str, bytes]:
    real = [line for line in (TESTDATA / "real.jsonl").read_bytes().splitlines() if line.strip()]
    vectors = {f"real-{i}": line for i, line in enumerate(real)}
    for row in (TESTDATA / "go_generated.tsv").read_bytes().splitlines():
        if row.strip():
            name, blob = row.split(b"\t", 1)
            vectors[name.decode()] = blob
    return vectors


VECTORS = _vectors()
TEGRA = next(blob for blob in VECTORS.values() if b"tegra" in blob)


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


def _file(tmp_path: Path, content: bytes, name: str = "kubelet_internal_checkpoint") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_every_vector_verifies(tmp_path: Path, name: str) -> None:
    blob = VECTORS[name]
    done = run("verify", str(_file(tmp_path, blob)))
    assert done.returncode == 0, done.stderr
    checksum = json.loads(blob)["Checksum"]
    version = 1 if name.startswith("v1") else 2
    assert done.stdout.startswith(f"OK: checksum {checksum}, ")
    assert done.stdout.endswith(f", format v{version}\n")
    assert done.stderr == ""


def test_verify_line(tmp_path: Path) -> None:
    done = run("verify", str(_file(tmp_path, TEGRA)))
    assert done.stdout == "OK: checksum 3660592824, 1 entry, 1 resource, format v2\n"


def test_verify_of_a_flipped_checksum_names_both_numbers(tmp_path: Path) -> None:
    path = _file(tmp_path, TEGRA.replace(b"3660592824", b"3660592825"))
    done = run("verify", str(path))
    assert done.returncode == 1
    assert done.stdout == ""
    line = _one_error_line(done)
    assert "checksum mismatch: file says 3660592825, content hashes to 3660592824" in line
    assert str(path) in line


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (TEGRA[: len(TEGRA) // 2], "invalid JSON at line 1, column"),
        (b"this is not json", "invalid JSON at line 1, column 1"),
        (b"", "the file is empty"),
        (b'{"Data":{"RegisteredDevices":{"\xff":[]}}}', "invalid UTF-8 at line 1, column 32"),
        (b'{"Data":{"PodDeviceEntries":[{"PodUID":1}]}}', "Data.PodDeviceEntries[0].PodUID"),
    ],
    ids=["truncated", "garbage", "empty", "non-utf8", "wrong-type"],
)
def test_verify_of_a_bad_file_is_exit_1_with_one_line(tmp_path: Path, content: bytes, words: str) -> None:
    done = run("verify", str(_file(tmp_path, content)))
    assert done.returncode == 1
    assert words in _one_error_line(done)


def test_verify_of_a_missing_file_is_exit_2(tmp_path: Path) -> None:
    done = run("verify", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert _one_error_line(done).startswith(
        f"error: checkpoint verify: checkpoint is not found: {tmp_path / 'nope'} — "
    )


def test_verify_of_a_directory_is_exit_2(tmp_path: Path) -> None:
    done = run("verify", str(tmp_path))
    assert done.returncode == 2
    assert "not a regular file (a directory)" in _one_error_line(done)


def test_verify_without_a_path_is_a_usage_error() -> None:
    done = run("verify")
    assert done.returncode == 2
    assert "Missing argument" in done.stderr and "Traceback" not in done.stderr


# ---------------------------------------------------------------------------------------------------------
# inspect


def test_inspect_json_of_a_real_file(tmp_path: Path) -> None:
    path = _file(tmp_path, TEGRA)
    done = run("inspect", "--json", str(path))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {
        "path": str(path),
        "formatVersion": 2,
        "checksum": {"found": 3660592824, "computed": 3660592824, "valid": True},
        "registeredDevices": {"nvidia.com/gpu": ["tegra"]},
        "entries": [
            {
                "podUID": "bf52b2cd-b611-4e79-86b1-280b283185c3",
                "containerName": "check",
                "resourceName": "nvidia.com/gpu",
                "deviceIDs": {"-1": ["tegra"]},
                "allocResp": {
                    "envs": {"NVIDIA_VISIBLE_DEVICES": "tegra"},
                    "mounts": [],
                    "devices": [],
                    "annotations": {},
                    "cdiDevices": [],
                },
                "allocRespError": None,
            }
        ],
    }


def test_inspect_json_of_a_v1_file(tmp_path: Path) -> None:
    done = run("inspect", "--json", str(_file(tmp_path, VECTORS["v1-basic"])))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["formatVersion"] == 1
    assert report["checksum"] == {"found": 3105977469, "computed": 3105977469, "valid": True}
    assert report["entries"][0]["deviceIDs"] == {"0": ["dev1", "dev2"]}


def test_inspect_json_of_null_sections(tmp_path: Path) -> None:
    done = run("inspect", "--json", str(_file(tmp_path, VECTORS["v2-nilmap"])))
    report = json.loads(done.stdout)
    assert report["registeredDevices"] is None and report["entries"] == []


def test_inspect_of_a_flipped_checksum_shows_the_content_and_exits_1(tmp_path: Path) -> None:
    path = _file(tmp_path, TEGRA.replace(b"3660592824", b"1"))
    done = run("inspect", "--json", str(path))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["checksum"] == {"found": 1, "computed": 3660592824, "valid": False}
    assert report["entries"][0]["podUID"] == "bf52b2cd-b611-4e79-86b1-280b283185c3"

    table = run("inspect", str(path))
    assert table.returncode == 1
    assert "checksum INVALID: file says 1, content hashes to 3660592824" in table.stdout
    assert "bf52b2cd-b611-4e79-86b1-280b283185c3" in table.stdout


def test_inspect_tables(tmp_path: Path) -> None:
    resp = dp.ContainerAllocateResponse(
        envs={"VISIBLE": "[bold]a"},
        mounts=[dp.Mount(container_path="/data", host_path="/srv/data", read_only=True)],
        devices=[dp.DeviceSpec(container_path="/dev/x0", host_path="/dev/x0", permissions="rw")],
        cdi_devices=[dp.CDIDevice(name="vendor.com/dev=x0")],
    )
    data = CheckpointData(
        [
            PodDevicesEntry(
                "uid-1", "ctr", "vendor.com/dev", {1: ["[red]x0"], -1: ["y"]}, resp.SerializeToString()
            ),
            PodDevicesEntry("uid-2", "ctr", "vendor.com/dev", None, None),
        ],
        {"vendor.com/dev": ["[red]x0", "y"], "vendor.com/idle": []},
    )
    store = CheckpointStore(tmp_path)
    store.write(data)
    done = run("inspect", str(store.path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for text in (
        "format v2",
        "valid",
        "uid-1",
        "NUMA 1: [red]x0",  # rich markup in IDs is shown literally
        "no topology: y",
        "env: VISIBLE",
        "devices: /dev/x0",
        "mounts: /data",
        "cdi: vendor.com/dev=x0",
        "uid-2",
        "vendor.com/idle",
        "(none healthy)",
    ):
        assert text in out, text


def test_inspect_reports_an_undecodable_allocate_response(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.write(CheckpointData([PodDevicesEntry("u", "c", "r", {0: ["d"]}, b"\xff\xff")], {"r": ["d"]}))
    done = run("inspect", "--json", str(store.path))
    assert done.returncode == 0
    entry = json.loads(done.stdout)["entries"][0]
    assert entry["allocResp"] is None
    assert entry["allocRespError"].startswith("not a ContainerAllocateResponse")


@pytest.mark.parametrize("as_json", [False, True])
def test_inspect_of_garbage_is_exit_1_with_one_line(tmp_path: Path, as_json: bool) -> None:
    args = ["inspect", *(["--json"] if as_json else []), str(_file(tmp_path, b"\x00garbage"))]
    done = run(*args)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "invalid JSON at line 1, column 1" in _one_error_line(done)


def test_inspect_of_a_missing_file_or_directory_is_exit_2(tmp_path: Path) -> None:
    for path in (tmp_path / "missing", tmp_path):
        done = run("inspect", str(path))
        assert done.returncode == 2
        _one_error_line(done)
