"""The built distribution, installed into a fresh virtualenv that holds only the kubedevice wheel.

`make dist`'s build (the sdist, then the wheel from it) runs on a copy of the sources; both carry the
LICENSE. From the venv, `kubedevice --version` and a built-in plugin under the conformance checker run, and
docs/testing.md's test file passes as-is, which proves the pytest kit needs nothing from the repository:
no src/ on sys.path, no tests/ helpers, and a working folder outside the repository. The wheel goes into
the venv with `pip install --no-deps`. Its
dependencies (grpcio, pytest, pytest-asyncio...) come from this test run's own site-packages, through a
folder of symlinks that leaves out kubedevice itself and every .pth file. The editable install of the
repository therefore cannot leak in, and nothing is fetched from an index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.waiting import short_tempdir

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "testing.md"
EXAMPLE = REPO / "examples" / "thermal_widget.py"
MARKER = "# test_thermal_widget.py"
DRA_MARKER = "# test_gpu_driver.py"
#: The folder docs/testing.md's recipe runs the test file in.
RECIPE_DIR = "/tmp/widget-tests"
#: What the build needs from the repository.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "src")
#: `make dist`'s build command, run on the copy of the sources.
BUILD = ("-m", "build", "--no-isolation")


def doc_test_file(marker: str = MARKER) -> str:
    """The python block of docs/testing.md that starts with the file-name comment."""
    for block in DOC.read_text(encoding="utf-8").split("```python\n")[1:]:
        code = block.split("```", 1)[0]
        if code.startswith(marker + "\n"):
            return code
    raise AssertionError(f"docs/testing.md has no python block starting with {marker!r}")


def recipe(folder: Path) -> list[str]:
    """docs/testing.md's sh block that runs the test file, with its folder swapped for `folder`."""
    for block in DOC.read_text(encoding="utf-8").split("```sh\n")[1:]:
        code = block.split("```\n", 1)[0]
        if RECIPE_DIR in code:
            return [line.replace(RECIPE_DIR, str(folder)) for line in code.strip().splitlines()]
    raise AssertionError(f"docs/testing.md has no sh block using {RECIPE_DIR}")


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@dataclass(frozen=True)
class Installed:
    """The built sdist and wheel, and a fresh venv holding only the wheel (dependencies linked in)."""

    workspace: Path
    sdist: Path
    wheel: Path
    venv: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    workspace = short_tempdir("kd-wheel-")
    try:
        sdist, wheel = build_dist(workspace)
        venv = workspace / "venv"
        run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=workspace)
        python = venv / "bin" / "python"
        pip = (sys.executable, "-m", "pip", "--python", python)
        run(*pip, "install", "-q", "--no-deps", "--no-index", wheel, cwd=workspace)
        site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=workspace)
        (Path(site.strip()) / "dependencies.pth").write_text(f"{dependency_folder(workspace)}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "VIRTUAL_ENV"))}
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        yield Installed(workspace, sdist, wheel, venv, env)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def build_dist(workspace: Path) -> tuple[Path, Path]:
    """The sdist and wheel, built from a copy of the sources: the build leaves nothing in the repository."""
    source = workspace / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(origin, source / name)
    dist = workspace / "dist"
    run(sys.executable, *BUILD, "--outdir", dist, source, cwd=workspace)
    (sdist,) = dist.glob("kubedevice-*.tar.gz")
    (wheel,) = dist.glob("kubedevice-*.whl")
    return sdist, wheel


def test_make_dist_runs_the_build_the_test_runs() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert f"$(BIN)/python {' '.join(BUILD)} --outdir dist ." in makefile


def test_the_sdist_and_the_wheel_carry_the_licence(installed: Installed) -> None:
    licence = (REPO / "LICENSE").read_bytes()
    assert b"Apache License" in licence and b"Version 2.0, January 2004" in licence
    assert b"APPENDIX: How to apply the Apache License to your work." in licence
    with zipfile.ZipFile(installed.wheel) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert wheel.read(name) == licence
        metadata = wheel.read(name.replace("licenses/LICENSE", "METADATA")).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()
    with tarfile.open(installed.sdist) as sdist:
        member = sdist.extractfile(f"{installed.sdist.name.removesuffix('.tar.gz')}/LICENSE")
        assert member is not None and member.read() == licence


def test_the_installed_command_runs_a_plugin_that_passes_conformance(installed: Installed) -> None:
    version = run("kubedevice", "--version", cwd=installed.workspace, env=installed.env)
    assert version.strip() == f"kubedevice {installed.wheel.name.split('-')[1]}"
    where = run("sh", "-c", "command -v kubedevice", cwd=installed.workspace, env=installed.env)
    assert where.strip() == str(installed.venv / "bin" / "kubedevice")
    report = run(
        "kubedevice", "conformance", "--json", "--restarts", "1", "--absence", "0.5", "--",
        "kubedevice", "plugin", "fake", "--resource", "example.com/gpu", "--devices", "2",
        "--plugin-dir", "{plugin_dir}",
        cwd=installed.workspace, env=installed.env,
    )  # fmt: skip
    results = {c["name"]: c["result"] for c in json.loads(report)["checks"]}
    assert {results[n] for n in ("registration", "list-and-watch", "kubelet-restart")} == {"PASS"}, report
    assert "FAIL" not in results.values(), report


def dependency_folder(workspace: Path) -> Path:
    """This interpreter's installed packages, minus kubedevice and every .pth file, as symlinks."""
    folder = workspace / "deps"
    folder.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name
        if name.startswith(("kubedevice", "__editable__")) or name.endswith(".pth") or name == "__pycache__":
            continue
        (folder / name).symlink_to(entry)
    return folder


def test_the_documented_test_file_passes_from_a_fresh_venv_with_only_the_wheel(installed: Installed) -> None:
    project = installed.workspace / "project"
    project.mkdir()
    shutil.copy2(EXAMPLE, project / "thermal_widget.py")
    (project / "test_thermal_widget.py").write_text(doc_test_file(), encoding="utf-8")
    (project / "test_gpu_driver.py").write_text(doc_test_file(DRA_MARKER), encoding="utf-8")

    python, env = installed.python, installed.env
    (ini_line,) = [line for line in recipe(project) if "pytest.ini" in line]
    run("sh", "-c", ini_line, cwd=project)
    where = run(python, "-c", "import kubedevice.testing as t; print(t.__file__)", cwd=project, env=env)
    assert where.startswith(str(installed.venv)), where

    output = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", project, cwd=project, env=env)
    assert "10 passed" in output, output
    assert "warning" not in output.lower(), output


def test_the_documented_recipe_runs_as_written_without_a_warning() -> None:
    folder = short_tempdir("kd-recipe-") / "widget-tests"
    try:
        lines = recipe(folder)
        assert lines[-1].startswith(".venv/bin/python -m pytest"), lines
        # This interpreter is the clone's .venv one under `make test`; named as such, whatever ran pytest.
        lines[-1] = lines[-1].replace(".venv/bin/python", sys.executable, 1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        done = subprocess.run(
            ["sh", "-e", "-c", "\n".join(lines)],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        assert "10 passed" in output, output
        assert "warning" not in output.lower(), output
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)
