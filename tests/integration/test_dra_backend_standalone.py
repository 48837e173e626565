"""The standalone DRA backend against a stand-in node daemon (the daemon's own status server on
`kubedevice.sock`) and a real slice folder: node name, claims, the slice file and its re-creation."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.plugin.dra.backend import DRABackendError, SliceContentError, make_backend
from kubedevice.plugin.dra.backend.standalone import StandaloneBackend
from kubedevice.plugin.dra.backend_api import ClaimFetchError, ClaimStatusError, PublishedDevice
from kubedevice.plugin.dra.device_model import CounterSet, DeviceCounterConsumption, DeviceTaint
from kubedevice.resource.slice_rules import validate_slice_spec
from kubedevice.statusapi.http import Response, StatusServer
from kubedevice.statusapi.stand_in import StandInStatusAPI
from tests.waiting import poll_async

DRIVER = "gpu.example.com"
CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c1", "namespace": "default", "uid": "0b3c6a3e-1111-2222-3333-444455556666"},
    "status": {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": "gpu-0"}],
                "config": [],
            }
        }
    },
}


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("NODE_NAME", raising=False)


@pytest.fixture
async def daemon(root: Path) -> AsyncIterator[StatusServer]:
    """The status API's routes the backend uses, served by the daemon's own HTTP server."""
    server = StatusServer(
        {
            "/node": lambda: Response.json({"nodeName": "node-1", "resources": {}}),
            "/claims/default/c1": lambda: Response.json(CLAIM),
            "/claims/default/gone": lambda: Response.json({"error": "claim default/gone not found"}, 404),
            "/claims/default/broken": lambda: Response.json({"error": "state unreadable"}, 500),
        }
    )
    await server.start(root / "kubedevice.sock")
    yield server
    await server.stop()


def gpus(*ids: str, **attributes: str | int | bool) -> list[PublishedDevice]:
    return [
        PublishedDevice(id=i, attributes=attributes, capacity={"memory": "16Gi"}, numa_nodes=(0,))
        for i in ids
    ]


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


async def started(root: Path) -> StandaloneBackend:
    backend = make_backend(kubelet_dir=root, driver_name=DRIVER)
    assert isinstance(backend, StandaloneBackend)
    await backend.start()
    return backend


async def test_node_name_comes_from_the_daemon_and_claims_from_its_status_api(
    root: Path, daemon: StatusServer
) -> None:
    backend = await started(root)
    try:
        assert backend.node_name == "node-1"
        assert await backend.get_claim("default", "c1") == CLAIM
        with pytest.raises(ClaimFetchError) as gone:
            await backend.get_claim("default", "gone")
        assert str(gone.value) == 'resourceclaims.resource.k8s.io "gone" not found'
        with pytest.raises(ClaimFetchError) as broken:
            await backend.get_claim("default", "broken")
        assert str(broken.value) == (
            "the node daemon answered GET /claims/default/broken with HTTP 500: state unreadable"
        )
    finally:
        await backend.stop()


async def test_a_daemon_without_claims_and_no_daemon_are_clear_errors(root: Path) -> None:
    old = StatusServer({"/node": lambda: Response.json({"nodeName": "node-1"})})
    await old.start(root / "kubedevice.sock")
    backend = await started(root)
    try:
        with pytest.raises(ClaimFetchError) as err:
            await backend.get_claim("default", "c1")
        assert str(err.value) == (
            f"the node daemon at {root}/kubedevice.sock serves no claims (`kubedevice node` without DRA?)"
        )
        await old.stop()
        with pytest.raises(ClaimFetchError, match=re.escape(f"cannot reach the node daemon at {root}")):
            await backend.get_claim("default", "c1")
    finally:
        await backend.stop()


async def test_no_daemon_and_no_node_name_refuses_to_start(root: Path) -> None:
    with pytest.raises(DRABackendError) as err:
        await started(root)
    assert str(err.value).startswith(f"no node name: cannot reach the node daemon at {root}/kubedevice.sock")
    assert str(err.value).endswith(f"— start `kubedevice node --root-dir {root}` first, or set NODE_NAME")


async def test_a_daemon_that_reports_no_node_name_refuses_to_start(root: Path) -> None:
    old = StatusServer({"/node": lambda: Response.json({"resources": {}})})
    await old.start(root / "kubedevice.sock")
    try:
        with pytest.raises(DRABackendError, match=r"does not report one .* — set NODE_NAME"):
            await started(root)
    finally:
        await old.stop()


async def test_node_name_from_the_environment_needs_no_daemon(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODE_NAME", "node-7")
    backend = await started(root)
    try:
        assert backend.node_name == "node-7"
        await backend.publish(gpus("gpu-0"))
        (doc,) = documents(backend.path)
        assert doc["metadata"]["name"] == f"node-7-{DRIVER}-0"
        assert doc["spec"]["nodeName"] == "node-7"
        assert doc["spec"]["pool"]["name"] == "node-7"
    finally:
        await backend.stop()


async def test_slice_file_content_generations_and_recreation(root: Path, daemon: StatusServer) -> None:
    backend = await started(root)
    path = root / "resourceslices" / f"{DRIVER}.yaml"
    try:
        await backend.publish(gpus("gpu-0", "gpu-1", model="x1"))
        assert documents(path) == [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"node-1-{DRIVER}-0"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": "node-1",
                    "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": name,
                            "attributes": {
                                "deviceID": {"string": name},
                                "numaNode": {"int": 0},
                                "model": {"string": "x1"},
                            },
                            "capacity": {"memory": {"value": "16Gi"}},
                        }
                        for name in ("gpu-0", "gpu-1")
                    ],
                },
            }
        ]
        # Publishing the same devices again (a new registration) keeps the generation; in another order
        # (another preference) it is new content.
        await backend.publish(gpus("gpu-0", "gpu-1", model="x1"))
        assert documents(path)[0]["spec"]["pool"]["generation"] == 1
        await backend.publish(gpus("gpu-1", "gpu-0", model="x1"))
        assert documents(path)[0]["spec"]["pool"]["generation"] == 2
        await backend.publish(gpus("gpu-0", model="x1"))
        assert documents(path)[0]["spec"]["pool"]["generation"] == 3
        assert [d["name"] for d in documents(path)[0]["spec"]["devices"]] == ["gpu-0"]

        # Deleted (the daemon's wipe): written again at once, same content and generation.
        before = path.read_text()
        path.unlink()
        await poll_async(path.exists, "the slice file written again")
        assert path.read_text() == before

        # A bad device publishes nothing: the file keeps the last good content.
        with pytest.raises(SliceContentError, match="device gpu-9: capacity memory"):
            await backend.publish([PublishedDevice(id="gpu-9", attributes={}, capacity={"memory": "lots"})])
        assert path.read_text() == before
    finally:
        await backend.stop()
    # Stopped: the file stays (the daemon wipes it once the driver is gone), and is no longer kept.
    assert path.read_text() == before
    path.unlink()

    # A restarted plugin continues the generation from the file it finds.
    backend = await started(root)
    try:
        path.write_text(before)
        await backend.stop()
        backend = await started(root)
        await backend.publish(gpus("gpu-0", "gpu-1", "gpu-2"))
        assert documents(path)[0]["spec"]["pool"]["generation"] == 4
    finally:
        await backend.stop()


async def test_the_folder_removed_whole_is_made_again(root: Path, daemon: StatusServer) -> None:
    backend = await started(root)
    try:
        await backend.publish(gpus(*(f"gpu-{i}" for i in range(200))))
        docs = documents(backend.path)
        assert [len(d["spec"]["devices"]) for d in docs] == [128, 72]
        assert {d["spec"]["pool"]["resourceSliceCount"] for d in docs} == {2}
        shutil.rmtree(backend.path.parent)
        await poll_async(backend.path.exists, "the slice folder and file made again")
        assert documents(backend.path) == docs
    finally:
        await backend.stop()


async def test_publish_before_start_is_a_programming_error(root: Path) -> None:
    backend = make_backend(kubelet_dir=root, driver_name=DRIVER, node_name="node-1")
    with pytest.raises(RuntimeError, match=re.escape("publish() before start()")):
        await backend.publish(gpus("gpu-0"))


def test_standalone_mode_never_loads_the_client_library(root: Path) -> None:
    """The SDK starts fast without cluster mode: the Kubernetes client is imported only for it."""
    code = (
        "import sys, pathlib\n"
        "from kubedevice.plugin.dra.backend import make_backend\n"
        f"make_backend(kubelet_dir=pathlib.Path({str(root)!r}), driver_name='g.example.com', node_name='n')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('lightkube', 'httpx2'))\n"
        "print(loaded)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"


async def test_two_instances_of_a_rolling_update_never_lower_the_generation(
    root: Path, daemon: StatusServer
) -> None:
    """Instances A and B of one driver write one file: each write has a higher generation than the last."""
    a, b = await started(root), await started(root)
    path = a.path
    try:
        await a.publish(gpus("gpu-0", "gpu-1"))
        assert documents(path)[0]["spec"]["pool"]["generation"] == 1
        await b.publish(gpus("gpu-0", "gpu-1"))
        assert documents(path)[0]["spec"]["pool"]["generation"] == 2
        await a.publish(gpus("gpu-0"))
        assert documents(path)[0]["spec"]["pool"]["generation"] == 3
        # B republishes its (older) devices, at its next registration: above A's generation, not below.
        await b.publish(gpus("gpu-0", "gpu-1"))
        doc = documents(path)[0]
        assert doc["spec"]["pool"]["generation"] == 4
        assert [d["name"] for d in doc["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    finally:
        await a.stop()
        await b.stop()


async def test_counter_sets_and_taints_in_the_slice_file(root: Path, daemon: StatusServer) -> None:
    """Counter sets in a slice of their own; a device consuming a set nobody offers publishes nothing;
    the taints' times are read back from the file a restarted driver finds."""
    added = datetime(2026, 7, 24, 10, 0, 0, tzinfo=UTC)
    half = (DeviceCounterConsumption("gpu-0-counters", {"memory": "40Gi"}),)
    taint = DeviceTaint("kubedevice.io/unhealthy", "NoExecute", time_added=added)
    devices = [
        PublishedDevice("gpu-0-half-0", {}, {}, consumes_counters=half, taints=(taint,)),
        PublishedDevice("gpu-0-half-1", {}, {}, consumes_counters=half),
    ]
    backend = await started(root)
    try:
        await backend.publish(devices, [CounterSet("gpu-0-counters", {"memory": "80Gi"})])
        docs = documents(backend.path)
        assert [sorted(d["spec"]) for d in docs] == [
            ["driver", "nodeName", "pool", "sharedCounters"],
            ["devices", "driver", "nodeName", "pool"],
        ]
        assert all(validate_slice_spec(d["spec"]) == [] for d in docs)
        assert {d["spec"]["pool"]["resourceSliceCount"] for d in docs} == {2}
        before = backend.path.read_text()
        with pytest.raises(SliceContentError, match='counter set "gpu-0-counters" referenced by device'):
            await backend.publish(devices)
        assert backend.path.read_text() == before
    finally:
        await backend.stop()
    backend = await started(root)
    try:
        assert await backend.published_taint_times() == {
            ("gpu-0-half-0", "kubedevice.io/unhealthy", "", "NoExecute"): added
        }
    finally:
        await backend.stop()


async def test_a_device_status_goes_to_the_daemons_status_route(root: Path) -> None:
    stand_in = StandInStatusAPI(root, "node-1")
    stand_in.put_claim("default", "c1", lambda: copy.deepcopy(CLAIM))
    await stand_in.start()
    backend = await started(root)
    try:
        [listed] = await backend.list_claims()
        assert listed["metadata"] == {"namespace": "default", "name": "c1", "uid": CLAIM["metadata"]["uid"]}
        entry = {"driver": DRIVER, "pool": "node-1", "device": "gpu-0", "data": {"firmware": "1.2"}}
        await backend.update_claim_status("default", "c1", lambda claim: [entry])
        assert stand_in.device_status("default", "c1") == [{**entry, "conditions": None}]
        claim = await backend.get_claim("default", "c1")
        assert claim["status"]["devices"] == [{**entry, "conditions": None}]
        with pytest.raises(ClaimFetchError, match='"gone" not found'):
            await backend.update_claim_status("default", "gone", lambda claim: [entry])
        with pytest.raises(ClaimStatusError, match="a driver writes its own entries"):
            await backend.update_claim_status(
                "default", "c1", lambda claim: [{**entry, "driver": "x.example.com"}]
            )
    finally:
        await backend.stop()
        await stand_in.stop()
