"""docs/testing.md's test file, run as-is from a fresh virtualenv holding only the built kubedevice wheel.

This proves the pytest kit needs nothing from the repository: no src/ on sys.path, no tests/ helpers, and a
working folder outside the repository. The wheel goes into the venv with `pip install --no-deps`. Its
dependencies (grpcio, pytest, pytest-asyncio...) come from this test run's own site-packages, through a
folder of symlinks that leaves out kubedevice itself and every .pth file. The editable install of the
repository therefore cannot leak in, and nothing is fetched from an index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import short_tempdir

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "testing.md"
EXAMPLE = REPO / "examples" / "thermal_widget.py"
MARKER = "# test_thermal_widget.py"
#: What the wheel's build needs from the repository.
BUILD_INPUTS = ("pyproject.toml", "README.md", "src")


def doc_test_file() -> str:
    """The python block of docs/testing.md that starts with the file-name comment."""
    for block in DOC.read_text(encoding="utf-8").split("```python\n")[1:]:
        code = block.split("```", 1)[0]
        if code.startswith(MARKER + "\n"):
            return code
    raise AssertionError(f"docs/testing.md has no python block starting with {MARKER!r}")


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def workspace() -> Iterator[Path]:
    folder = short_tempdir("kd-wheel-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def build_wheel(workspace: Path) -> Path:
    """The wheel, built from a copy of the sources, so the build leaves nothing behind in the repository."""
    source = workspace / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(origin, source / name)
    dist = workspace / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, source,
        cwd=workspace)  # fmt: skip
    (wheel,) = dist.glob("kubedevice-*.whl")
    return wheel


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


def test_the_documented_test_file_passes_from_a_fresh_venv_with_only_the_wheel(workspace: Path) -> None:
    wheel = build_wheel(workspace)
    venv = workspace / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=workspace)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel,
        cwd=workspace)  # fmt: skip
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=workspace))
    (Path(site.as_posix().strip()) / "dependencies.pth").write_text(f"{dependency_folder(workspace)}\n")

    project = workspace / "project"
    project.mkdir()
    shutil.copy2(EXAMPLE, project / "thermal_widget.py")
    (project / "test_thermal_widget.py").write_text(doc_test_file(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    where = run(python, "-c", "import kubedevice.testing as t; print(t.__file__)", cwd=project, env=env)
    assert where.startswith(str(venv)), where

    output = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", project, cwd=project, env=env)
    assert "6 passed" in output, output
