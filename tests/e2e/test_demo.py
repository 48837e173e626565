"""`kubedevice demo` runs its stories end to end, exits 0 and leaves nothing behind; each story shows the
tables it is about once, and nothing is cut in a 100-column terminal."""

from __future__ import annotations

import glob
import os
import pty
import re
import select
import subprocess
import time
from dataclasses import dataclass

from tests.node_helpers import CLI

TABLES = ("Device-plugin resources", "Pods", "ResourceClaims", "DRA drivers")
#: Colours and cursor moves a terminal gets: not part of the text.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class _Run:
    returncode: int
    #: stdout and stderr as the terminal showed them, without colours.
    stdout: str


def _demo_in_a_terminal(columns: int, timeout: float = 120.0) -> _Run:
    """The demo as a user sees it in a terminal `columns` wide (a pty: rich lays out for its width)."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm", "NO_COLOR": "1"}
    proc = subprocess.Popen([*CLI, "demo"], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], end - time.monotonic())
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the demo exited and closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        code = proc.wait(timeout=max(1.0, end - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = ANSI.sub("", seen.decode(errors="replace")).replace("\r\n", "\n")
    return _Run(code, text)


def test_demo_plays_every_story_and_cleans_up() -> None:
    before = set(glob.glob("/tmp/kubedevice-demo-*"))
    result = _demo_in_a_terminal(100)
    assert result.returncode == 0, result.stdout[-3000:]
    for step in (
        "both plugins registered",
        "trainer is Running with its GPU and NIC on one NUMA node",
        "wide is Failed (TopologyAffinityError)",
        "trainer kept its devices and NUMA hint from the checkpoint",
        "capacity returned",
        "allocatable 0, capacity kept",
        "the resource left capacity",
        "capacity and allocatable are back",
        "best-effort admits wide across both NUMA nodes",
        # DRA: a shared claim prepared once, a claim per container, kept across a restart, unprepared by
        # the last pod that leaves.
        "gpu.example.com registered and its 4 devices are in /node",
        "duo is Running",
        "the driver prepared each claim once: shared for left and right together",
        "no prepare call after the restart",
        "shared stays prepared for right (no unprepare call)",
        "right is gone and the driver unprepared shared",
        "demo finished",
    ):
        assert step in result.stdout, step
    assert set(glob.glob("/tmp/kubedevice-demo-*")) == before

    # The intro and each story (split at "==> Story N"), with the titles of the tables each shows.
    parts = re.split(r"^==> Story \d", result.stdout, flags=re.MULTILINE)
    shown = [[line.strip() for line in part.splitlines() if line.strip() in TABLES] for part in parts]
    assert shown == [
        ["Device-plugin resources", "Pods"],
        ["Pods"],
        ["Device-plugin resources"],
        ["Pods"],
        ["ResourceClaims"],
        [],
        ["ResourceClaims"],
    ], shown
    # What the driver was asked: each claim prepared once (pods are admitted in any order), then only
    # shared unprepared.
    driver = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("driver: ")]
    assert sorted(driver[:3]) == [
        "driver: prepare demo/one",
        "driver: prepare demo/shared",
        "driver: prepare demo/two",
    ], driver
    assert driver[3:] == ["driver: unprepare demo/shared"], driver
    # 100 columns: a table's rows wrap or fold; no column is cut ("…"), no table runs past the width.
    lines = result.stdout.splitlines()
    assert not [line for line in lines if "…" in line]
    tables = [line for line in lines if line.startswith(("┏", "┃", "┡", "│", "└"))]
    assert tables and all(len(line) <= 100 and line.endswith(("┓", "┃", "┩", "│", "┘")) for line in tables)
