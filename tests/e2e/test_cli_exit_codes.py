"""The same mistake gets the same answer in every command: one `error: <command>: <what> — <what to do>` line
on stderr and exit code 2, whether it is a bad option, a root where no daemon runs, an empty folder option
or a listen address that is taken."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.node_helpers import CLI, short_tmpdir

NO_DAEMON = "cannot reach the node daemon at"


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    folder = short_tmpdir("kd-exit-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield int(busy.getsockname()[1])


def _table(root: Path, port: int) -> list[tuple[list[str], str]]:
    """(arguments, the start of the one stderr line): a wrong root, an empty one, a bad option per command."""
    socket_path = str(root / "none.sock")
    empty_root = "--root-dir is empty — give a folder, or leave the option out for its default"
    fake = ["plugin", "fake", "--resource", "example.com/gpu", "--devices", "1"]
    rows: list[tuple[list[str], str]] = []
    for command in ("status", "pods", "claims", "top"):
        rows += [
            ([command, "--root-dir", str(root)], f"error: {command}: {NO_DAEMON} {root}/kubedevice.sock"),
            (
                [command, "--root-dir", str(root / "missing")],
                f"error: {command}: {NO_DAEMON} {root}/missing/",
            ),
            ([command, "--root-dir", ""], f"error: {command}: {empty_root}"),
            (
                [command, "--bogus"],
                f"error: {command}: No such option: --bogus — see 'kubedevice {command} --help'",
            ),
        ]
    rows += [
        (["top", "--socket", socket_path], f"error: top: no PodResources socket at {socket_path}"),
        (["node", "--root-dir", ""], f"error: node: {empty_root}"),
        (["node", "--bogus"], "error: node: No such option: --bogus"),
        (["node", "--root-dir", str(root / "n"), "--http-addr", str(port)], "error: node: cannot listen on"),
        (["demo", "--bogus"], "error: demo: No such option: --bogus"),
        (["podresources", "list", "--socket", socket_path], "error: podresources list: nothing listens at"),
        (["podresources", "list", "--bogus"], "error: podresources list: No such option: --bogus"),
        (["checkpoint", "inspect", str(root / "none")], "error: checkpoint inspect: checkpoint is not found"),
        (["checkpoint", "verify", "--bogus"], "error: checkpoint verify: No such option: --bogus"),
        (["exporter", "--bogus"], "error: exporter: No such option: --bogus"),
        (
            [
                "exporter",
                "--listen",
                str(port),
                "--podresources-socket",
                socket_path,
                "--checkpoint",
                socket_path,
            ],
            f"error: exporter: cannot listen on 127.0.0.1:{port}: Address already in use — choose another",
        ),
        (["conformance", "--bogus"], "error: conformance: No such option: --bogus"),
        (["plugin", "fake", "--bogus"], "error: plugin fake: No such option: --bogus"),
        (
            [*fake, "--plugin-dir", ""],
            "error: plugin fake: --plugin-dir is empty — give a folder",
        ),
        (
            [*fake, "--plugin-dir", str(root), "--metrics-port", str(port)],
            f"error: plugin fake: cannot serve metrics on port {port}: Address already in use — choose",
        ),
        (["--bogus"], "error: kubedevice: No such option: --bogus"),
    ]
    return rows


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL
    )


def test_every_command_answers_the_same_mistake_with_one_line_and_exit_2(
    scratch: Path, busy_port: int
) -> None:
    table = _table(scratch, busy_port)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(_run, (args for args, _ in table)))
    wrong = []
    for (args, start), result in zip(table, results, strict=True):
        lines = result.stderr.strip().splitlines()
        errors = [line for line in lines if line.startswith("error:")]
        if (
            result.returncode != 2
            or len(errors) != 1
            or not errors[0].startswith(start)
            or " — " not in errors[0]
            or "Traceback" in result.stderr
            or "[Errno" in result.stderr
        ):
            wrong.append((args, result.returncode, result.stderr))
    assert wrong == []
