"""The README's commands run as written (with /tmp/kd swapped for a temporary folder), as real processes.

The node daemon block: the daemon and the fake plugin in the background, a sample pod copied in, then
`status`, `pods` and `podresources`. The plugin example's documented command, on its shipped widget tree.
The demo's closing "try it yourself" lines are the same commands. (`kubedevice demo` has its own test.)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedevice.node.demo import TRY_IT_YOURSELF
from tests.node_helpers import short_tmpdir, wait_for

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
#: The README's folders: /tmp/kd, /tmp/kd2 (a second node), as whole paths or a path's first components;
#: never a longer name such as /tmp/kdx, nor /tmp/kd inside another path.
README_ROOT = re.compile(r"""(?<![\w./-])/tmp/kd(?P<number>[0-9]*)(?=[/\s"'`]|$)""")


def swap_root(text: str, root: Path) -> str:
    """`text` with the README's /tmp/kd (and /tmp/kdN) replaced by `root` (and `root`N), as whole paths."""
    return README_ROOT.sub(lambda m: f"{root}{m['number']}", text)


def readme_block(marker: str) -> list[str]:
    """The command lines of the README's sh block that contains `marker` (comments dropped)."""
    for block in README.read_text(encoding="utf-8").split("```sh")[1:]:
        code = block.split("```")[0]
        if marker in code:
            return [line.split("  #")[0].strip() for line in code.strip().splitlines() if line.strip()]
    raise AssertionError(f"README.md has no sh block with {marker!r}")


class Shell:
    """Runs README lines: `cmd &` in the background (killed at the end), others to completion."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.background: list[subprocess.Popen[bytes]] = []

    def line(self, text: str) -> subprocess.CompletedProcess[str] | None:
        """Run one README line; its `python` is this test's interpreter (swapped in after the paths)."""
        background = text.endswith("&")
        argv = shlex.split(swap_root(text.removesuffix("&"), self.root))
        if argv[0] == "python":
            argv[0] = sys.executable
        if background:
            log = open(self.root.parent / f"{self.root.name}-{len(self.background)}.log", "wb")  # noqa: SIM115
            self.background.append(subprocess.Popen(argv, cwd=REPO, env=ENV, stdout=log, stderr=log))
            return None
        return subprocess.run(argv, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60)

    def close(self) -> None:
        for process in self.background:
            process.send_signal(signal.SIGTERM)
        for process in self.background:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def shell() -> Iterator[Shell]:
    base = short_tmpdir("kd-readme-")
    sh = Shell(base / "kd")
    try:
        yield sh
    finally:
        sh.close()
        shutil.rmtree(base, ignore_errors=True)


def _pods(shell: Shell) -> dict[str, str]:
    result = shell.line("kubedevice pods --root-dir /tmp/kd --json")
    if result is None or result.returncode != 0:
        return {}
    return {p["name"]: p["phase"] for p in json.loads(result.stdout)["pods"]}


def test_the_node_daemon_block_runs_as_written(shell: Shell) -> None:
    lines = readme_block("kubedevice node --root-dir /tmp/kd")
    start = [line for line in lines if line.endswith("&")]
    assert [line.split()[1] for line in start][:2] == ["node", "plugin"]  # then more nodes, as examples
    for line in start:
        shell.line(line)
    wait = next(line for line in lines if "--wait-for" in line)
    assert lines.index(wait) < next(i for i, line in enumerate(lines) if line.startswith("cp "))
    waited = shell.line(wait)
    assert waited is not None and waited.returncode == 0, waited and waited.stderr
    assert "example.com/gpu" in waited.stdout
    copy = next(line for line in lines if line.startswith("cp "))
    assert shell.line(copy).returncode == 0  # type: ignore[union-attr]
    wait_for(lambda: _pods(shell).get("one-gpu") == "Running", "the sample pod to be Running")
    for line in lines:
        if line.startswith(("kubedevice status", "kubedevice pods", "kubedevice podresources")):
            result = shell.line(line)
            assert result is not None and result.returncode == 0, (line, result and result.stderr)
            assert "one-gpu" in result.stdout or "example.com/gpu" in result.stdout, (line, result.stdout)
    for sample in ("init-sidecar-app.yaml", "too-many-gpus.yaml"):
        shell.line(f"cp examples/pods/{sample} /tmp/kd/manifests/")
    wait_for(
        lambda: (
            {k: v for k, v in _pods(shell).items() if k != "one-gpu"}
            == {"init-sidecar-app": "Running", "too-many-gpus": "Failed"}
        ),
        "the other samples: one Running, one Failed",
    )


def _run_dra_example(shell: Shell, lines: list[str]) -> None:
    """The DRA block's first lines: the daemon and the fake driver, then the example copied in; until the
    example's pod runs."""
    for line in lines[:2]:
        assert line.endswith("&")
        shell.line(line)
        if " node " in f" {line} ":
            wait_for(lambda: (shell.root / "kubedevice.sock").exists(), "the status socket")
    copy = lines[2]
    assert copy.startswith("cp ")

    def published() -> bool:
        path = shell.root / "resourceslices" / "gpu.example.com.yaml"
        return path.exists()

    wait_for(published, "the fake driver's slices")
    assert shell.line(copy).returncode == 0  # type: ignore[union-attr]
    wait_for(lambda: _pods(shell).get("dra-gpu") == "Running", "the DRA pod to be Running")


def test_the_dra_block_runs_as_written(shell: Shell) -> None:
    lines = readme_block("dra-gpu-claim.yaml")
    _run_dra_example(shell, lines)
    pods = shell.line(lines[3])
    assert pods is not None and pods.returncode == 0, pods and pods.stderr
    (pod,) = json.loads(pods.stdout)["pods"]
    assert pod["containers"][0]["cdiDevices"] == ["gpu.example.com/gpu=gpu-0"]
    listed = shell.line(lines[4])
    assert listed is not None and listed.returncode == 0, listed and listed.stderr
    (container,) = json.loads(listed.stdout)["podResources"][0]["containers"]
    assert container["dynamicResources"][0]["claimName"] == "gpu-claim"
    claims = shell.line(lines[5])
    assert claims is not None and claims.returncode == 0, claims and claims.stderr
    assert "ResourceClaims" in claims.stdout and "default/gpu-claim" in claims.stdout
    (row,) = [line for line in claims.stdout.splitlines() if "default/gpu-claim" in line]
    assert row.split("│")[5].strip() == "yes"  # prepared
    status = shell.line(lines[6])
    assert status is not None and status.returncode == 0, status and status.stderr
    assert status.stdout == "default/gpu-claim: status.devices holds 1 entry of gpu.example.com (1 in all)\n"
    again = shell.line(lines[5])
    assert again is not None and (
        "  default/gpu-claim gpu.example.com/node-1/gpu-0: Ready=True; gpu0; data: model" in again.stdout
    ), again.stdout


def test_the_dra_example_runs_whatever_the_node_is_called(shell: Shell) -> None:
    """The same block on a node named otherwise (a host's name): the example's claim gets a device of the
    pool the fake driver publishes for this node, named after it."""
    lines = readme_block("dra-gpu-claim.yaml")
    daemon = re.sub(r"--node-name \S+", "--node-name host-a", lines[0])
    assert daemon != lines[0]
    _run_dra_example(shell, [daemon, *lines[1:]])
    listed = shell.line("kubedevice claims --root-dir /tmp/kd --json")
    assert listed is not None and listed.returncode == 0, listed and listed.stderr
    (claim,) = json.loads(listed.stdout)["claims"]
    results = claim["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [
        ("gpu.example.com", "host-a", "gpu-0")
    ]
    assert claim["prepared"] is True


def test_the_example_plugins_documented_command_runs_on_its_widget_tree(shell: Shell) -> None:
    shell.line("kubedevice node --root-dir /tmp/kd &")
    wait_for(lambda: (shell.root / "device-plugins" / "kubelet.sock").exists(), "kubelet.sock")
    readme = README.read_text(encoding="utf-8")
    command = "python examples/thermal_widget.py --root examples/widgets --plugin-dir /tmp/kd/device-plugins"
    assert command in readme
    shell.line(command + " &")

    def widgets() -> tuple[int, int] | None:
        result = shell.line("kubedevice status --root-dir /tmp/kd --json")
        if result is None or result.returncode != 0:
            return None
        node = json.loads(result.stdout)
        resource = "example.com/thermal-widget"
        found = (node["capacity"].get(resource), node["allocatable"].get(resource))
        return found if found == (3, 2) else None

    wait_for(widgets, "3 widgets, w2 too hot")


def test_the_demo_ends_with_the_readmes_commands() -> None:
    lines = [line.split("  #")[0].strip() for line in TRY_IT_YOURSELF.splitlines()]
    readme = README.read_text(encoding="utf-8")
    for line in lines[2:]:
        if line:
            assert line.split(" --stop-grace-period")[0].rstrip(" &") in readme, line
