"""`kubedevice claims` and the DRA drivers of `kubedevice status`, against a real daemon and a real fake DRA
driver: the table says what `/claims` says, fits 100 columns without cutting, `--json` is the answer."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.node_dra_helpers import DRIVER, DRANodeProcesses, claim_yaml, dra_node_processes, pod_yaml
from tests.node_helpers import CLI

A = "0b7e6a52-0000-4000-8000-00000000000a"
B = "0b7e6a52-0000-4000-8000-00000000000b"
U1 = "c1c1c1c1-0000-4000-8000-000000000001"
U2 = "c2c2c2c2-0000-4000-8000-000000000002"
#: Colours and cursor moves a terminal gets: not part of the text.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def _run(node: DRANodeProcesses, *args: str) -> str:
    out = subprocess.run(
        [*CLI, *args, "--root-dir", str(node.root)], capture_output=True, text=True, timeout=30, check=True
    )
    return out.stdout


def _in_a_terminal(node: DRANodeProcesses, *args: str, columns: int = 100) -> str:
    """What a user sees in a terminal `columns` wide (a pty: rich lays the table out for its width)."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [*CLI, *args, "--root-dir", str(node.root)], stdin=subprocess.DEVNULL, stdout=slave, env=env
    )
    os.close(slave)
    seen = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the command exited and closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return ANSI.sub("", seen.decode(errors="replace")).replace("\r\n", "\n")


def _columns(table: str) -> dict[str, str]:
    """Each column's text top to bottom, folded lines joined and spaces dropped: header -> body."""

    def cells(border: str) -> list[list[str]]:
        lines = [line.strip() for line in table.splitlines() if line.strip().startswith(border)]
        return [line[1:-1].split(border) for line in lines]

    def joined(rows: list[list[str]], i: int) -> str:
        return "".join("".join(row[i].split()) for row in rows)

    header, body = cells("┃"), cells("│")
    return {joined(header, i): joined(body, i) for i in range(len(header[0]))}


def test_claims_table_and_json_and_the_dra_drivers_of_status(node: DRANodeProcesses) -> None:
    node.start_daemon()
    node.start_dra_plugin(devices=2)
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1) + "---\n" + claim_yaml("c2", None, uid=U2))
    node.write_manifest("a.yaml", pod_yaml("a", "c1", uid=A))
    node.write_manifest("b.yaml", pod_yaml("b", "c1", uid=B))
    node.wait_phase("a", "Running")
    node.wait_phase("b", "Running")

    answer = json.loads(_run(node, "claims", "--json"))
    assert answer == node.try_status("/claims")
    by_name = {c["name"]: c for c in answer["claims"]}
    assert set(by_name) == {"c1", "c2"}

    table = _in_a_terminal(node, "claims")
    lines = table.splitlines()
    assert lines[0].strip() == "ResourceClaims"
    assert not [line for line in lines if len(line) > 100 or "…" in line], table
    columns = _columns(table)
    assert columns == {
        "namespace/name": "default/c1default/c2",
        "uid": U1 + U2,
        "allocation": f"gpu:{DRIVER}/node-1/gpu-0(bythemanifest)notallocated",
        "reservedfor": "a,b(bythedaemon)-",
        "prepared": "yesno",
        "CDIdevices": f"{DRIVER}/gpu=gpu-0-",
        "pods": "default/adefault/b-",
    }

    status = _in_a_terminal(node, "status")
    assert "DRA drivers" in status
    # The tables fit; a whole line said under them (a long socket path) may run on, as it always did.
    boxed = [line for line in status.splitlines() if line.startswith(("┏", "┃", "┡", "│", "└"))]
    assert not [line for line in boxed if len(line) > 100 or "…" in line], status
    drivers = _columns(status[status.index("DRA drivers") :])
    assert (drivers["driver"], drivers["connected"]) == (DRIVER, "1of1")
    assert (drivers["devices"], drivers["pools"]) == ("2:gpu-0,gpu-1", "node-1")
    assert drivers["endpoints"].endswith(".sock")
    status_json = json.loads(_run(node, "status", "--json"))
    assert status_json["draDrivers"][DRIVER]["devices"] == ["node-1/gpu-0", "node-1/gpu-1"]


def test_a_claim_restored_after_a_restart_reads_restored_in_json_as_in_the_table(
    node: DRANodeProcesses,
) -> None:
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1) + "---\n" + claim_yaml("c2", None, uid=U2))
    node.write_manifest("a.yaml", pod_yaml("a", "c1", uid=A))
    node.wait_phase("a", "Running")
    states = {c["name"]: c["preparedState"] for c in json.loads(_run(node, "claims", "--json"))["claims"]}
    assert states == {"c1": "yes", "c2": "no"}

    assert node.kill_daemon(signal.SIGTERM) == 0
    node.start_daemon()
    node.wait_phase("a", "Running")
    answer = {c["name"]: c for c in json.loads(_run(node, "claims", "--json"))["claims"]}
    # The keys scripts already read stay; `preparedState` says what the table's column says.
    c1 = answer["c1"]
    assert (c1["prepared"], c1["cached"], c1["preparedState"]) == (False, True, "restored")
    assert answer["c2"]["preparedState"] == "no"
    assert _columns(_in_a_terminal(node, "claims"))["prepared"] == "restoredno"
