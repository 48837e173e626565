"""`kubedevice top` as a process against the node daemon with `fake` plugins on a 2-NUMA node.

With stdout not a terminal it prints one frame, compared to a stored one (tests/data/top/); on a terminal
(a pty here) it refreshes until `q` and gives the terminal back as it found it.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.node_helpers import CLI, DEADLINE_S, WEB_POD, NodeProcesses, node_processes, run_cli, wait_for

GPU = "example.com/gpu"
NIC = "example.com/nic"
FRAMES = Path(__file__).resolve().parents[1] / "data" / "top"
TRAINER = f"""apiVersion: v1
kind: Pod
metadata: {{name: trainer, namespace: ml}}
spec:
  initContainers:
  - name: logs
    restartPolicy: Always
    resources: {{limits: {{{GPU}: 1}}}}
  containers:
  - name: train
    resources: {{limits: {{{GPU}: 2}}}}
"""


def _prepare(n: NodeProcesses) -> None:
    """8 GPUs on 2 NUMA nodes and 2 NICs without topology; 2 pods; fake-1 (held) and fake-6 (free) fail."""
    health = n.root / "health.json"
    health.write_text("[]")
    n.start_daemon()
    n.start_plugin(GPU, 8, "--numa-nodes", "2", "--health-file", str(health))
    n.start_plugin(NIC, 2)
    n.wait_capacity(GPU, 8, 8)
    n.wait_capacity(NIC, 2, 2)
    # One after the other, so that which pod gets which device is always the same.
    n.write_manifest("web.yaml", WEB_POD)
    n.wait_phase("web", "Running")
    n.write_manifest("trainer.yaml", TRAINER)
    n.wait_phase("trainer", "Running")
    health.write_text(json.dumps(["fake-1", "fake-6"]))
    wait_for(lambda: n.node()["resources"][GPU]["unhealthy"] == ["fake-1", "fake-6"], "two GPUs to fail")


@pytest.fixture(scope="module")
def node() -> Iterator[NodeProcesses]:
    for n in node_processes():
        _prepare(n)
        yield n


def _frame(node: NodeProcesses, *args: str) -> str:
    result = run_cli("top", *args)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = [line.rstrip() for line in result.stdout.replace(str(node.root), "ROOT").splitlines()]
    assert all(len(line) <= 80 for line in lines), result.stdout
    return "\n".join(lines) + "\n"


def test_one_frame_from_the_status_api(node: NodeProcesses) -> None:
    got = _frame(node, "--root-dir", str(node.root))
    assert got == (FRAMES / "two_numa_status.txt").read_text(), got


def test_one_frame_from_a_bare_podresources_socket(node: NodeProcesses) -> None:
    # PodResources lists healthy devices only: the failed free GPU is invisible, the failed held one unknown.
    got = _frame(node, "--socket", str(node.paths.pod_resources_socket))
    assert got == (FRAMES / "two_numa_podresources.txt").read_text(), got


def test_one_frame_is_as_wide_as_columns_asks(node: NodeProcesses) -> None:
    # The frame is laid out for 80 columns; COLUMNS narrower than that wraps its long lines to fit.
    env = {**os.environ, "COLUMNS": "60"}
    result = subprocess.run(
        [*CLI, "top", "--root-dir", str(node.root)], capture_output=True, text=True, env=env, timeout=30
    )
    assert result.returncode == 0, result.stderr
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines and all(len(line) <= 60 for line in lines), result.stdout
    assert "example.com/gpu  8 devices: 4 held" in result.stdout and "NUMA 1   !2   2" in result.stdout


def _read_until(fd: int, marker: bytes, what: str) -> bytes:
    seen = b""
    end = time.monotonic() + DEADLINE_S
    while marker not in seen:
        remaining = end - time.monotonic()
        assert remaining > 0, f"timed out waiting for {what}; got {seen[-500:]!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the pty
                break
    return seen


def _press_q(proc: subprocess.Popen[bytes], master: int) -> None:
    os.write(master, b"q")  # cbreak mode: the key arrives without Enter


def _ctrl_c(proc: subprocess.Popen[bytes], master: int) -> None:
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends; the pty here is not top's controlling terminal


@pytest.mark.parametrize("quit_by", [_press_q, _ctrl_c], ids=["q", "ctrl-c"])
def test_live_view_quits_and_restores_the_terminal(
    node: NodeProcesses, quit_by: Callable[[subprocess.Popen[bytes], int], None]
) -> None:
    master, slave = pty.openpty()
    before = termios.tcgetattr(slave)
    proc = subprocess.Popen(
        [*CLI, "top", "--root-dir", str(node.root)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "COLUMNS": "80", "LINES": "40", "TERM": "xterm"},
    )
    try:
        _read_until(master, b"q or Ctrl-C quits", "the first live frame")
        wait_for(lambda: not termios.tcgetattr(slave)[3] & termios.ICANON, "top to switch off line mode")
        quit_by(proc, master)
        assert proc.wait(timeout=DEADLINE_S) == 0
        assert termios.tcgetattr(slave) == before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        os.close(slave)


def test_errors_are_one_line(tmp_path: Path) -> None:
    both = run_cli("top", "--root-dir", str(tmp_path), "--socket", str(tmp_path / "s.sock"))
    assert both.returncode == 2
    assert both.stderr == "error: top: --root-dir and --socket are alternatives — pass one of them\n"
    for args, what in (
        (("--root-dir", str(tmp_path)), "cannot reach the node daemon at"),
        (("--socket", str(tmp_path / "s.sock")), "no PodResources socket at"),
    ):
        result = run_cli("top", *args)
        assert result.returncode == 2, result
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: top: "), result.stderr
        assert what in result.stderr and "Traceback" not in result.stderr
