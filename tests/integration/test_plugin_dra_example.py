"""examples/dra_gpu_driver.py, run as its own process beside a stand-in node daemon."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubedevice.statusapi.http import Response, StatusServer
from tests.dra_kubelet import DRIVER, make_claim, prepare, register, unprepare
from tests.waiting import poll_async, short_tempdir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "dra_gpu_driver.py"
UID = "6f1d2c3b-0000-4000-8000-000000000001"
CLAIM = make_claim(
    "c1",
    UID,
    [("gpu", "gpu-0"), ("gpu", "gpu-1")],
    config=[{"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {"sharing": "TimeSlicing"}}}],
)


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("NODE_NAME", raising=False)
    directory = short_tempdir("kdex-")
    (directory / "plugins_registry").mkdir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_example_is_short() -> None:
    assert len(EXAMPLE.read_text().splitlines()) < 80


def slice_devices(path: Path) -> list[dict[str, object]] | None:
    if not path.exists():
        return None
    return [device for d in yaml.safe_load_all(path.read_text()) if d for device in d["spec"]["devices"]]


async def test_example_driver_publishes_prepares_and_unprepares(root: Path) -> None:
    daemon = StatusServer(
        {
            "/node": lambda: Response.json({"nodeName": "node-1", "resources": {}}),
            "/claims/default/c1": lambda: Response.json(CLAIM),
        }
    )
    await daemon.start(root / "kubedevice.sock")
    cdi = root / "cdi"
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLE), "--root", str(EXAMPLES / "gpus"),
        "--kubelet-dir", str(root), "--cdi-spec-dir", str(cdi),
        stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        registration = root / "plugins_registry" / f"{DRIVER}-reg.sock"
        await poll_async(registration.exists, "the registration socket")
        await register(registration)
        devices = await poll_async(
            lambda: slice_devices(root / "resourceslices" / f"{DRIVER}.yaml"), "slices"
        )
        assert [(d["name"], d["capacity"]) for d in devices] == [  # type: ignore[index]
            ("gpu-0", {"memory": {"value": "8Gi"}}),
            ("gpu-1", {"memory": {"value": "16Gi"}}),
        ]
        dra = root / "plugins" / DRIVER / "dra.sock"
        answer = await prepare(dra, [(UID, "c1")])
        assert [d["cdi_device_ids"] for d in answer[UID]["devices"]] == [[f"gpu.example.com/claim={UID}"], []]
        spec = json.loads((cdi / f"gpu-example-claim-{UID}.json").read_text())
        assert spec["devices"][0]["containerEdits"]["env"] == ["GPUS=gpu-0,gpu-1", "GPU_SHARING=TimeSlicing"]
        assert await unprepare(dra, [(UID, "c1")]) == {UID: ""}
        assert not (cdi / f"gpu-example-claim-{UID}.json").exists()
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            code = await process.wait()
        await daemon.stop()
    assert code == 0
