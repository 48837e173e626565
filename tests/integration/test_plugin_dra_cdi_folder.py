"""Where a DRA driver's CDI spec files go: a driver tried beside the node daemon touches nothing outside the
kubelet folder it was given, and one setting (`cdi_spec_dir`) names the folder for both faces."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedevice.plugin import Allocation, Device, DevicePlugin
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIR, CDIDevice, CDISpec, ContainerEdits
from kubedevice.plugin.dra.paths import DEFAULT_KUBELET_DIR, cdi_spec_dir
from kubedevice.plugin.dra.runner import FacesServer
from kubedevice.statusapi.http import Response, StatusServer
from tests.dra_kubelet import MemoryBackend, make_claim, prepare, register
from tests.waiting import poll_async, short_tempdir

#: A driver of its own, so that what it leaves in the machine's /var/run/cdi cannot be another test's.
DRIVER = "cdi-folder.example.com"
DRIVER_SCRIPT = f'''
import sys
from kubedevice.plugin import Allocation, Device, DevicePlugin, serve
from kubedevice.plugin.cdi import CDIDevice, CDISpec, ContainerEdits

class Gpus(DevicePlugin):
    driver_name = "{DRIVER}"

    async def devices(self):
        return [Device("gpu-0"), Device("gpu-1")]

    async def allocate(self, devices):
        return Allocation(envs={{"GPUS": ",".join(d.id for d in devices)}})

    def cdi_spec(self, devices):
        edits = [CDIDevice(d.id, ContainerEdits(env=("GPU=" + d.id,))) for d in devices]
        return CDISpec("{DRIVER}/gpu", tuple(edits))

serve(Gpus(), api="dra", kubelet_dir=sys.argv[1])
'''


class Gpus(DevicePlugin):
    driver_name = DRIVER

    def __init__(self, spec_dir: Path | None = None) -> None:
        if spec_dir is not None:
            self.cdi_spec_dir = spec_dir

    async def devices(self) -> list[Device]:
        return [Device("gpu-0"), Device("gpu-1")]

    async def allocate(self, devices: object) -> Allocation:
        return Allocation(envs={"GPUS": "yes"})

    def cdi_spec(self, devices: object) -> CDISpec:
        return CDISpec(f"{DRIVER}/gpu", (CDIDevice("gpu-0", ContainerEdits(env=("GPU=gpu-0",))),))


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("KUBERNETES_SERVICE_HOST", "NODE_NAME", "KUBEDEVICE_KUBELET_DIR"):
        monkeypatch.delenv(name, raising=False)
    directory = short_tempdir("kdcdi-")
    (directory / "plugins_registry").mkdir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def ours_in(folder: Path, uid: str) -> list[str]:
    """Files in `folder` this test's driver wrote (named after its driver or the claim)."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if DRIVER in p.name or uid in p.name)


def claim_spec(folder: Path, uid: str) -> Path:
    return folder / f"kubedevice-{DRIVER}-{uid}.json"


def own_spec(folder: Path) -> Path:
    return folder / f"{DRIVER}-gpu.json"


async def test_serve_beside_the_daemon_writes_specs_into_the_kubelet_folder_only(root: Path) -> None:
    uid = str(uuid.uuid4())
    machine_had_folder = DEFAULT_SPEC_DIR.is_dir()
    daemon = StatusServer(
        {
            "/node": lambda: Response.json({"nodeName": "node-1", "resources": {}}),
            "/claims/default/c1": lambda: Response.json(make_claim("c1", uid, [("gpu", "gpu-1", DRIVER)])),
        }
    )
    await daemon.start(root / "kubedevice.sock")
    script = root / "driver.py"
    script.write_text(textwrap.dedent(DRIVER_SCRIPT))
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(root), env=dict(os.environ), stdout=asyncio.subprocess.DEVNULL
    )
    try:
        registration = root / "plugins_registry" / f"{DRIVER}-reg.sock"
        await poll_async(registration.exists, "the registration socket")
        await register(registration)
        answer = await prepare(root / "plugins" / DRIVER / "dra.sock", [(uid, "c1")])
        assert answer[uid]["error"] == ""
        assert answer[uid]["devices"][0]["cdi_device_ids"] == [f"{DRIVER}/claim={uid}-gpu"]
        # Where docs/sdk.md says: <kubelet_dir>/cdi, the plugin's own spec and one per prepared claim.
        spec = json.loads(claim_spec(root / "cdi", uid).read_text())
        assert spec["devices"][0]["containerEdits"]["env"] == ["GPUS=gpu-1"]
        assert own_spec(root / "cdi").exists()
        assert ours_in(DEFAULT_SPEC_DIR, uid) == []
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            code = await process.wait()
        await daemon.stop()
    assert code == 0
    assert not own_spec(root / "cdi").exists()  # the plugin's own spec goes with it
    assert ours_in(DEFAULT_SPEC_DIR, uid) == []
    if not machine_had_folder:
        assert not DEFAULT_SPEC_DIR.exists(), "the driver made the machine's /var/run/cdi"


@pytest.mark.parametrize("set_by", ["class attribute", "dra_options"])
async def test_one_setting_names_the_folder_of_every_spec_file(root: Path, set_by: str) -> None:
    """`cdi_spec_dir` on the plugin, or DRAServer's `dra_options={"cdi_spec_dir": ...}`: the per-claim
    specs and the plugin's own go there, never to the kubelet folder's default or /var/run/cdi."""
    uid = str(uuid.uuid4())
    folder = root / "specs"
    backend = MemoryBackend(node_name="node-1")
    backend.add(make_claim("c1", uid, [("gpu", "gpu-0", DRIVER)]))
    plugin = Gpus(folder if set_by == "class attribute" else None)
    options = {"dra_options": {"cdi_spec_dir": folder}} if set_by == "dra_options" else {}
    server = FacesServer(plugin, "dra", kubelet_dir=root, backend=backend, **options)  # type: ignore[arg-type]
    await server.start()
    try:
        assert server.dra is not None
        await poll_async(server.dra.paths.dra_socket.exists, "the DRA socket")
        answer = await prepare(server.dra.paths.dra_socket, [(uid, "c1")])
        assert answer[uid]["error"] == ""
        assert claim_spec(folder, uid).exists() and own_spec(folder).exists()
        assert ours_in(root / "cdi", uid) == [] and ours_in(DEFAULT_SPEC_DIR, uid) == []
    finally:
        await server.stop()


def test_the_default_folder_follows_the_kubelet_folder() -> None:
    tried = Path("/tmp/kd")
    assert cdi_spec_dir(None, tried, cluster=False) == tried / "cdi"
    assert cdi_spec_dir(None, Path(DEFAULT_KUBELET_DIR), cluster=False) == DEFAULT_SPEC_DIR
    assert cdi_spec_dir(None, tried, cluster=True) == DEFAULT_SPEC_DIR  # a real kubelet's other folder
    assert cdi_spec_dir("/srv/cdi", tried, cluster=False) == Path("/srv/cdi")
