"""`kubedevice plugin fake --driver ...` as a real process: the DRA face against a kubelet played over
the real sockets, beside a stand-in for the node daemon's status API (node name and claims)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.api.drahealth.v1 import api_pb2 as health_v1
from kubedevice.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIR
from kubedevice.statusapi.http import Response, StatusServer
from tests.dra_kubelet import (
    DRIVER,
    health_messages,
    make_claim,
    next_matching,
    prepare,
    register,
    unprepare,
)
from tests.plugin_kubelet import FakeKubelet
from tests.plugin_process import KUBEDEVICE, PluginProcess, fields
from tests.waiting import poll_async, short_tempdir

UID = "0b3c6a3e-1111-2222-3333-444455556666"
CLAIM = make_claim("c1", UID, [("gpu", "gpu-1")])


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("NODE_NAME", raising=False)
    directory = short_tempdir("kdfake-")
    (directory / "plugins_registry").mkdir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def daemon(root: Path) -> AsyncIterator[StatusServer]:
    """The two routes of the node daemon's status API a standalone DRA driver uses."""
    server = StatusServer(
        {
            "/node": lambda: Response.json({"nodeName": "node-1", "resources": {}}),
            "/claims/default/c1": lambda: Response.json(CLAIM),
        }
    )
    await server.start(root / "kubedevice.sock")
    yield server
    await server.stop()


def slice_devices(root: Path) -> list[dict[str, Any]] | None:
    path = root / "resourceslices" / f"{DRIVER}.yaml"
    if not path.exists():
        return None
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return [device for d in documents for device in d["spec"]["devices"]]


async def test_fake_dra_driver_registers_publishes_and_prepares(root: Path, daemon: StatusServer) -> None:
    registration = root / "plugins_registry" / f"{DRIVER}-reg.sock"
    dra = root / "plugins" / DRIVER / "dra.sock"
    async with PluginProcess(
        "fake", "--driver", DRIVER, "--devices", "2", "--numa-nodes", "1",
        "--attribute", "model=x1", "--attribute", "cores=8", "--attribute", "ecc=true",
        "--attribute", "firmware=version:1.2.3", "--capacity", "memory=16Gi",
        "--kubelet-dir", str(root), "--cdi-spec-dir", str(root / "cdi"),
    ) as plugin:  # fmt: skip
        serving = [fields(await plugin.expect("serving ")) for _ in range(2)]
        assert {s["endpoint"] for s in serving} == {str(dra), str(registration)}
        info = await register(registration)
        assert (info.type, info.name, info.endpoint) == ("DRAPlugin", DRIVER, str(dra))
        assert fields(await plugin.expect("registered "))["driver"] == DRIVER
        await plugin.expect("published ")
        devices = await poll_async(lambda: slice_devices(root), "the slice file")
        assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
        attributes = devices[1]["attributes"]
        assert {k: v for k, v in attributes.items() if k != "uuid"} == {
            "model": {"string": "x1"},
            "cores": {"int": 8},
            "ecc": {"bool": True},
            "firmware": {"version": "1.2.3"},
            "index": {"int": 1},
            "deviceID": {"string": "gpu-1"},
            "numaNode": {"int": 0},
        }
        assert set(attributes["uuid"]) == {"string"}
        assert devices[1]["capacity"] == {"memory": {"value": "16Gi"}}

        first = await prepare(dra, [(UID, "c1")])
        assert first[UID]["error"] == ""
        assert fields(await plugin.expect("prepare ")) == {
            "driver": DRIVER,
            "claim": "default/c1",
            "uid": UID,
        }
        assert await prepare(dra, [(UID, "c1")]) == first
        assert fields(await plugin.expect("prepare-cached "))["uid"] == UID
        assert first[UID]["devices"][0]["cdi_device_ids"] == ["gpu.example.com/gpu=gpu-1"]
        spec = json.loads((root / "cdi" / "gpu.example.com-gpu.json").read_text())
        assert spec["kind"] == "gpu.example.com/gpu"
        assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
        assert not (root / "cdi" / f"kubedevice-{DRIVER}-{UID}.json").exists()  # nothing beyond CDI IDs
        assert await unprepare(dra, [(UID, "c1")]) == {UID: ""}
        assert fields(await plugin.expect("unprepare "))["claim"] == "default/c1"
        code, _, stderr = await plugin.terminate(signal.SIGTERM)
        assert code == 0, stderr
    assert not registration.exists() and not dra.exists()
    assert not (root / "cdi" / "gpu.example.com-gpu.json").exists()  # the plugin's spec goes with it
    # Published devices outlive the plugin (the node side wipes them once it is gone for good).
    assert slice_devices(root) is not None


async def test_fake_dra_driver_beside_the_daemon_keeps_its_specs_in_the_kubelet_folder(
    root: Path, daemon: StatusServer
) -> None:
    """Without --cdi-spec-dir, a driver given a kubelet folder that is not /var/lib/kubelet writes its specs
    into that folder's cdi/ (the log says so once), nothing into the machine's /var/run/cdi; its event
    lines name it as DRA does, `driver=`."""
    driver = "fake-cdi.example.com"  # its own spec file name: another test's cannot be mistaken for it
    spec = f"{driver}-fake-cdi.json"
    async with PluginProcess(
        "fake", "--driver", driver, "--devices", "2", "--kubelet-dir", str(root)
    ) as plugin:
        serving = await plugin.expect("serving ")
        assert serving.startswith(f"serving driver={driver} endpoint=")
        assert json.loads((root / "cdi" / spec).read_text())["kind"] == f"{driver}/fake-cdi"
        said = await plugin.expect_stderr("CDI spec files go to")
        assert f"CDI spec files go to {root / 'cdi'}, inside the kubelet folder {root}" in said
        assert not (DEFAULT_SPEC_DIR / spec).exists()
        code, rest, stderr = await plugin.terminate(signal.SIGTERM)
    assert code == 0, stderr
    assert rest.splitlines()[-1] == f"stopped driver={driver}"
    assert stderr.count("CDI spec files go to") == 1
    assert not (root / "cdi" / spec).exists() and not (DEFAULT_SPEC_DIR / spec).exists()


def test_fake_help_says_what_each_face_names_its_devices() -> None:
    result = subprocess.run(
        [KUBEDEVICE, "plugin", "fake", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    text = " ".join(result.stdout.split())
    assert (
        "How many devices: fake-0 .. fake-<N-1>; with --driver (DRA, or both faces) named after its first "
        "label, gpu.example.com: gpu-0 .. gpu-<N-1>." in text
    )
    assert "[default: /var/run/cdi; <kubelet dir>/cdi when --kubelet-dir is not /var/lib/kubelet" in text


def run_fake(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBEDEVICE, "plugin", "fake", "--devices", "1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_fake_dra_start_errors(root: Path) -> None:
    state = root / "plugins" / DRIVER / "kubedevice-dra-state.json"
    state.parent.mkdir(parents=True)
    state.write_text("{not json")
    cases = {
        (
            "--api",
            "dra",
        ): "error: plugin fake: give --resource (the device plugin API), --driver (DRA) or both",
        ("--resource", "example.com/gpu", "--api", "dra"): "error: plugin fake: --api dra needs --driver",
        ("--driver", DRIVER, "--api", "both"): "error: plugin fake: --api both needs --resource",
        (
            "--driver",
            DRIVER,
            "--replicas",
            "2",
        ): "error: plugin fake: --replicas shares devices on the device",
        ("--driver", "GPU"): "error: plugin fake: driver name 'GPU' is not a DNS subdomain",
        (
            "--driver",
            DRIVER,
            "--attribute",
            "model",
        ): "error: plugin fake: --attribute 'model' is not NAME=VALUE",
        ("--driver", DRIVER, "--kubelet-dir", str(root)): f"error: plugin fake: {state}: not valid JSON",
    }
    for args, text in cases.items():
        result = run_fake(*args)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(text), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr


def readme_dra_command() -> list[str]:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for block in readme.split("```sh")[1:]:
        code = block.split("```")[0].strip()
        if "--driver gpu.example.com" in code:
            return code.split()
    raise AssertionError("README.md has no sh block with the fake DRA driver")


async def test_the_readmes_dra_command_runs_as_written(root: Path) -> None:
    args = [a.replace("/tmp/kd-dra", str(root)) for a in readme_dra_command()]
    assert args[:3] == ["kubedevice", "plugin", "fake"]
    async with PluginProcess(*args[2:]) as plugin:
        await plugin.expect("published ")
        devices = await poll_async(lambda: slice_devices(root), "the slice file")
        assert [(d["name"], d["attributes"]["model"]) for d in devices] == [
            ("gpu-0", {"string": "x1"}),
            ("gpu-1", {"string": "x1"}),
        ]
        code, _, stderr = await plugin.terminate(signal.SIGTERM)
        assert code == 0, stderr


async def test_fake_both_faces_split_the_devices(root: Path, daemon: StatusServer) -> None:
    """--api both: the first half on the device plugin API (kubelet.sock), the rest on DRA; both faces'
    folders come from --kubelet-dir."""
    device_plugins = root / "device-plugins"
    device_plugins.mkdir()
    async with (
        FakeKubelet(str(device_plugins)) as kubelet,
        PluginProcess(
            "fake", "--resource", "example.com/gpu", "--driver", DRIVER, "--api", "both", "--devices", "4",
            "--kubelet-dir", str(root),
            "--cdi-spec-dir", str(root / "cdi"),
        ) as plugin,
    ):  # fmt: skip
        registration = await kubelet.wait_registrations(1)
        await kubelet.wait_for(lambda: bool(registration.lists), "device list")
        assert sorted(registration.health()) == ["gpu-0", "gpu-1"]
        registration_socket = root / "plugins_registry" / f"{DRIVER}-reg.sock"
        await poll_async(registration_socket.exists, "the registration socket")
        await register(registration_socket)
        devices = await poll_async(lambda: slice_devices(root), "the slice file")
        assert [d["name"] for d in devices] == ["gpu-2", "gpu-3"]
        code, _, stderr = await plugin.terminate(signal.SIGTERM)
        assert code == 0, stderr


async def test_fake_dra_health_file_flips_the_stream_and_the_slice(root: Path, daemon: StatusServer) -> None:
    """Scenario 30, the plugin's part, as a process: gpu-1 turns unhealthy through --health-file."""
    health = root / "health.json"
    dra = root / "plugins" / DRIVER / "dra.sock"
    async with PluginProcess(
        "fake", "--driver", DRIVER, "--devices", "2", "--health-file", str(health), "--poll-interval", "0.05",
        "--kubelet-dir", str(root), "--cdi-spec-dir", str(root / "cdi"),
    ) as plugin:  # fmt: skip
        registration = root / "plugins_registry" / f"{DRIVER}-reg.sock"
        await poll_async(registration.exists, "the registration socket")
        await register(registration)
        stream = health_messages(dra, health_v1, health_v1_grpc)
        await next_matching(stream, {"gpu-0": "HEALTHY", "gpu-1": "HEALTHY"})
        health.write_text('["gpu-1"]')
        await next_matching(stream, {"gpu-0": "HEALTHY", "gpu-1": "UNHEALTHY"})
        await poll_async(
            lambda: [d["name"] for d in slice_devices(root) or []] == ["gpu-0"], "gpu-1 unpublished"
        )
        await stream.aclose()
        code, _, stderr = await plugin.terminate(signal.SIGTERM)
        assert code == 0, stderr
