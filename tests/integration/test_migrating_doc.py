"""docs/migrating.md's Python runs as written: its blocks, executed in order, make plugins the stand-in
kubelet serves, and the page's own test function passes against the `kubelet` fixture; its worked
example's conformance run passes on this machine, which has no accelerators, as the page says it does."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubedevice.plugin import DevicePlugin, PluginOptions
from kubedevice.testing import StandInKubelet

DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"


def doc_namespace() -> dict[str, Any]:
    """Every python block of the page, executed in order in one namespace (not as __main__)."""
    blocks = [block.split("```", 1)[0] for block in DOC.read_text(encoding="utf-8").split("```python\n")[1:]]
    assert len(blocks) >= 5
    namespace: dict[str, Any] = {"__name__": "migrating_doc"}
    for number, block in enumerate(blocks):
        exec(compile(block, f"docs/migrating.md python block {number}", "exec"), namespace)
    return namespace


def make_accelerators(root: Path, nodes: dict[str, int]) -> tuple[Path, Path]:
    dev, sys_root = root / "dev", root / "sys"
    dev.mkdir()
    for name, node in nodes.items():
        (dev / name).touch()
        (sys_root / name).mkdir(parents=True)
        (sys_root / name / "numa_node").write_text(str(node))
        (sys_root / name / "state").write_text("ok")
    return dev, sys_root


def test_the_plugins_advertise_what_their_hooks_implement() -> None:
    ns = doc_namespace()
    for name in ("Accelerators", "PushedAccelerators", "CdiAccelerators", "LargeAccelerators"):
        assert issubclass(ns[name], DevicePlugin), name
    assert ns["Accelerators"]().options() == PluginOptions(True, True)
    assert ns["Accelerators"]().describe_source() == "poll"
    assert ns["PushedAccelerators"]().describe_source() == "watch"


async def test_the_pages_own_test_passes_against_the_kubelet_fixture(
    kubelet: StandInKubelet, tmp_path: Path
) -> None:
    ns = doc_namespace()
    await ns["test_accelerators_as_the_kubelet_sees_them"](kubelet, tmp_path)


async def test_the_pushed_source_and_the_cdi_variant_serve(kubelet: StandInKubelet, tmp_path: Path) -> None:
    ns = doc_namespace()
    dev, sys_root = make_accelerators(tmp_path, {"accel0": 0, "accel1": 1})
    (sys_root / "accel1" / "state").write_text("overheated")
    await kubelet.serve_plugin(ns["PushedAccelerators"](str(dev), str(sys_root)))
    await kubelet.devices("vendor.example/accel")
    assert kubelet.health("vendor.example/accel") == {"accel0": True, "accel1": False}

    cdi = ns["CdiAccelerators"](str(dev), str(sys_root))
    cdi.resource_name = "vendor.example/accel-cdi"
    cdi.cdi_spec_dir = tmp_path / "cdi"
    await kubelet.serve_plugin(cdi)
    await kubelet.devices("vendor.example/accel-cdi")
    spec = json.loads((tmp_path / "cdi" / "vendor.example-accel.json").read_text())
    assert [d["name"] for d in spec["devices"]] == ["accel0", "accel1"]
    allocation = await kubelet.allocate("accel0", resource="vendor.example/accel-cdi")
    assert list(allocation.cdi_devices) == ["vendor.example/accel=accel0"]


async def test_several_resources_run_in_one_process_until_sigterm(
    kubelet: StandInKubelet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = doc_namespace()
    dev, sys_root = make_accelerators(tmp_path, {"accel0": 0})
    monkeypatch.setenv("KUBEDEVICE_PLUGIN_DIR", str(kubelet.plugin_dir))
    plugins = [ns["Accelerators"](str(dev), str(sys_root)), ns["LargeAccelerators"](str(dev), str(sys_root))]
    running = asyncio.create_task(ns["run_all"](plugins))
    for resource in ("vendor.example/accel", "vendor.example/accel-large"):
        assert [d.id for d in await kubelet.devices(resource)] == ["accel0"]
    os.kill(os.getpid(), signal.SIGTERM)  # run_all's handler, installed before it registered
    await asyncio.wait_for(running, timeout=10)
    assert not [p for p in os.listdir(kubelet.plugin_dir) if p.startswith("vendor.example")]


def _sh_blocks() -> list[str]:
    return [block.split("```", 1)[0] for block in DOC.read_text(encoding="utf-8").split("```sh\n")[1:]]


def test_the_worked_example_passes_conformance_on_a_machine_without_accelerators(tmp_path: Path) -> None:
    # The page's first block saved as accelerators.py, as it says; `python` and `kubedevice` from this venv.
    first = DOC.read_text(encoding="utf-8").split("```python\n")[1].split("```", 1)[0]
    (tmp_path / "accelerators.py").write_text(first)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBEDEVICE_PLUGIN_DIR", None)
    env["COLUMNS"] = "200"  # the report's rows on one line each, whatever this process's environment says

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )

    # As written, on a machine without /dev/accel*: the failure the page names.
    (as_written,) = [
        b for b in _sh_blocks() if b == "kubedevice conformance --numa-nodes 2 -- python accelerators.py\n"
    ]
    if not [name for name in os.listdir("/dev") if name.startswith("accel")]:
        bare = run(as_written)
        assert bare.returncode == 1, bare.stdout + bare.stderr
        rows = {line.split("│")[1].strip(): line for line in bare.stdout.splitlines() if line.count("│") > 2}
        assert " WARN " in rows["list-and-watch"] and "the first list is empty" in bare.stdout
        assert " FAIL " in rows["kubelet-restart"]
        assert "registered again with an empty device list" in bare.stdout
    # With the page's fixture folder it passes, every check.
    (with_fixture,) = [b for b in _sh_blocks() if "ACCEL_DEV=" in b]
    done = run(with_fixture)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].strip() == "PASSED", done.stdout
    assert not [line for line in lines if " FAIL " in line or " WARN " in line or " SKIP " in line], (
        done.stdout
    )
