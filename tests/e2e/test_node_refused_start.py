"""`kubedevice node` checks every option before it creates anything: a refused start leaves no folder."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node_helpers import CLI, short_tmpdir


@pytest.fixture
def scratch() -> Iterator[Path]:
    folder = short_tmpdir("kd-refuse-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _node(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "node", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: node: ") and " — " in lines[0], result.stderr
    return lines[0]


@pytest.mark.parametrize("flag", ["--root-dir", "--pod-manifest-path"])
def test_an_empty_folder_option_is_refused_and_the_current_folder_stays_empty(
    scratch: Path, flag: str
) -> None:
    args = ["--root-dir", ""] if flag == "--root-dir" else ["--root-dir", str(scratch / "r"), flag, " "]
    line = _one_error_line(_node(scratch, *args))
    assert line == f"error: node: {flag} is empty — give a folder, or leave the option out for its default"
    assert list(scratch.iterdir()) == []


def test_a_root_too_long_for_its_sockets_leaves_no_folder(scratch: Path) -> None:
    # One byte too many: ROOT/device-plugins/kubelet.sock is 108 bytes.
    root = scratch / ("r" * (108 - len("/device-plugins/kubelet.sock") - len(f"{scratch}/")))
    line = _one_error_line(_node(scratch, "--root-dir", str(root)))
    assert f"root {root} is too long: {root}/device-plugins/kubelet.sock is 108 bytes" in line
    assert line.endswith(f"— give a root of at most {len(str(root)) - 1} bytes")
    assert not root.exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--topology-manager-policy", "best-effort", "--numa-nodes", "9"],
        [
            "--topology-manager-policy",
            "restricted",
            "--topology-manager-policy-options",
            "max-allowable-numa-nodes=4",
        ],
        [
            "--topology-manager-policy",
            "best-effort",
            "--topology-manager-policy-options",
            "prefer-closest-numa-nodes=maybe",
        ],
        ["--topology-manager-policy", "strict"],
        ["--numa-nodes", "0"],
        ["--plugin-timeout", "0"],
        ["--dra-state-recovery", "ignore"],
        ["--dra-reconcile-period", "0"],
        ["--dra-binding-timeout", "500ms"],
        ["--node-name", "Node_1"],
    ],
)
def test_a_bad_option_leaves_no_folder(scratch: Path, flags: list[str]) -> None:
    root = scratch / "root"
    _one_error_line(_node(scratch, "--root-dir", str(root), *flags))
    assert not root.exists()


def test_the_dra_flags_are_refused_with_what_to_give(scratch: Path) -> None:
    root = scratch / "root"
    line = _one_error_line(_node(scratch, "--root-dir", str(root), "--dra-state-recovery", "ignore"))
    assert line == "error: node: --dra-state-recovery 'ignore' is not a recovery — give refuse or move-aside"
    line = _one_error_line(_node(scratch, "--root-dir", str(root), "--node-name", "Node_1"))
    assert line == (
        "error: node: --node-name 'Node_1' is not a node name (a DNS subdomain: lower-case letters, "
        "digits, '-' and '.') — give one with --node-name"
    )
