"""`kubedevice plugin fake --cdi` as a real process: a real spec for its devices, for as long as it runs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.plugin.cdi import defined_devices, read_spec
from tests.e2e.test_readme_commands import ENV, readme_block
from tests.plugin_kubelet import FakeKubelet, exists, plugin_dir
from tests.plugin_process import KUBEDEVICE, PluginProcess, fields

__all__ = ["plugin_dir"]


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_the_spec_lists_every_device_defines_allocate_names_and_goes_on_stop(
    plugin_dir: str, sig: int
) -> None:
    spec_dir = Path(plugin_dir) / "run-cdi"
    spec_file = spec_dir / "example.com-fake.json"
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess(
            "fake", "--resource", "example.com/fake", "--devices", "3", "--unhealthy", "fake-2",
            "--cdi", "--cdi-spec-dir", str(spec_dir), "--plugin-dir", plugin_dir,
        ) as plugin,
    ):  # fmt: skip
        written = await plugin.expect("cdi-spec-written ")
        assert fields(written) == {"resource": "example.com/fake", "path": str(spec_file), "devices": "3"}
        await plugin.expect("registered ")
        document = load(spec_file)
        assert document["kind"] == "example.com/fake" and document["cdiVersion"] == "0.3.0"
        # Every device, the unhealthy one too: health changes must not make names undefined.
        assert [d["name"] for d in document["devices"]] == ["fake-0", "fake-1", "fake-2"]
        assert document["devices"][1]["containerEdits"] == {"env": ["FAKE_CDI_FAKE_1=fake-1"]}
        assert read_spec(spec_file).qualified_names() == [f"example.com/fake=fake-{i}" for i in range(3)]

        registration = await kubelet.wait_registrations(1)
        response = await registration.stub.Allocate(
            dp.AllocateRequest(
                container_requests=[dp.ContainerAllocateRequest(devices_ids=["fake-1", "fake-0"])]
            )
        )
        names = [c.name for c in response.container_responses[0].cdi_devices]
        assert names == ["example.com/fake=fake-0", "example.com/fake=fake-1"]
        assert set(names) <= defined_devices((spec_dir,))

        code, rest, stderr = await plugin.terminate(sig)
        assert code == 0, stderr
        assert rest.splitlines()[-2:] == [
            f"cdi-spec-removed resource=example.com/fake path={spec_file}",
            "stopped resource=example.com/fake",
        ]
        assert not exists(str(spec_file))
        assert os.listdir(spec_dir) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--resource", "example.com/3d", "--cdi-spec-dir", "{tmp}/cdi"],
            "error: plugin fake: --cdi: the resource name is the CDI kind, and CDI class '3d' in kind "
            "'example.com/3d' is invalid — start with a letter, use letters, digits, '_', '-', '.', end with "
            "a letter or digit",
        ),
        (
            ["--resource", "example.com/fake", "--cdi-spec-dir", "{tmp}/file/cdi"],
            "error: plugin fake: CDI spec folder {tmp}/file/cdi: {tmp}/file is a file, not a folder — give a "
            "folder",
        ),
    ],
)
def test_an_unusable_cdi_setting_is_one_line_and_exit_2(
    plugin_dir: str, args: list[str], message: str
) -> None:
    Path(plugin_dir, "file").write_text("")
    result = subprocess.run(
        [KUBEDEVICE, "plugin", "fake", "--devices", "2", "--cdi", "--plugin-dir", plugin_dir,
         *[arg.replace("{tmp}", plugin_dir) for arg in args]],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines() == [message.replace("{tmp}", plugin_dir)]
    assert result.stdout == ""


def test_the_readme_cdi_command_runs_as_written_without_a_warning(tmp_path: Path) -> None:
    (line,) = readme_block("--cdi-spec-dir")
    args = shlex.split(line.replace("/tmp/kd-cdi", str(tmp_path / "kd-cdi")))
    result = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    allocate = next(row for row in result.stdout.splitlines() if row.lstrip("│ ").startswith("allocate"))
    assert "PASS" in allocate and "WARN" not in result.stdout, result.stdout
    assert os.listdir(tmp_path / "kd-cdi") == []  # the plugin removed its spec as it stopped


async def test_shared_devices_are_defined_by_their_physical_device(plugin_dir: str) -> None:
    spec_dir = Path(plugin_dir) / "cdi"
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess(
            "fake", "--resource", "example.com/fake", "--devices", "2", "--replicas", "3",
            "--cdi", "--cdi-spec-dir", str(spec_dir), "--plugin-dir", plugin_dir,
        ) as plugin,
    ):  # fmt: skip
        assert fields(await plugin.expect("cdi-spec-written "))["devices"] == "2"
        registration = await kubelet.wait_registrations(1)
        response = await registration.stub.Allocate(
            dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["fake-1::2"])])
        )
        names = [c.name for c in response.container_responses[0].cdi_devices]
        assert names == ["example.com/fake=fake-1"]
        assert defined_devices((spec_dir,)) == {"example.com/fake=fake-0", "example.com/fake=fake-1"}
        code, _, stderr = await plugin.terminate()
        assert code == 0, stderr
        assert os.listdir(spec_dir) == []
