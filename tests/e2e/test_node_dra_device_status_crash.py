"""Crash consistency of a driver's status update: the daemon SIGKILLed inside the `dra_claims.json` write of
a `PUT .../status` (KUBEDEVICE_TEST_CLAIM_STATE_FAULT), at each write stage in turn.

The update is answered only once written, so a killed one is never acknowledged. After each kill the file
reads as JSON and holds the status before the update (killed before the rename) or after it (killed after
the rename), never a mix nor none; the next daemon shows that status and leaves no temporary file."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from kubedevice.checkpoint import WRITE_STAGES
from kubedevice.node.config import CLAIM_STATE_FAULT_ENV
from kubedevice.statusapi.client import StatusClient, StatusClientError
from tests.node_dra_helpers import DRIVER, NODE, DRANodeProcesses, claim_yaml, dra_node_processes
from tests.node_helpers import DEADLINE_S, wait_for


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def status(n: int) -> list[dict[str, Any]]:
    """The n-th update's entries: the device Ready, observed at generation n + 1 (0 is left out)."""
    condition = {
        "type": "Ready",
        "status": "True",
        "observedGeneration": n + 1,
        "reason": "Configured",
        "lastTransitionTime": "2026-07-24T10:00:00Z",
        "message": "",
    }
    return [{"driver": DRIVER, "pool": NODE, "device": "gpu-0", "conditions": [condition]}]


def put(node: DRANodeProcesses, n: int) -> dict[str, Any]:
    client = StatusClient.under(node.root)
    return asyncio.run(client.put_claim_status("default", "c1", driver=DRIVER, devices=status(n)))


def on_disk(node: DRANodeProcesses) -> Any:
    return json.loads((node.root / "dra_claims.json").read_text())["claims"]["default/c1"]["devices"]


def temp_files(node: DRANodeProcesses) -> set[str]:
    return {p.name for p in node.root.iterdir() if p.name.startswith(".")}


def test_sigkill_inside_the_write_of_a_status_update_leaves_the_old_status_or_the_new(
    node: DRANodeProcesses,
) -> None:
    node.start_daemon()
    node.write_manifest("c1.yaml", claim_yaml("c1"))
    wait_for(lambda: node.claim("c1"), "the claim to be read")
    assert put(node, 0)["status"]["devices"] == status(0)
    shown = 0
    for n, stage in enumerate(WRITE_STAGES, start=1):
        assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
        node.start_daemon(env={CLAIM_STATE_FAULT_ENV: f"{stage}:1:1"})
        with pytest.raises(StatusClientError):
            put(node, n)  # the daemon dies inside the write: no answer
        assert node.daemon is not None and node.daemon.wait(timeout=DEADLINE_S) == -signal.SIGKILL
        # Past the rename the new file is in place; before it, the old one still is.
        shown = n if stage == "after-rename" else shown
        assert on_disk(node) == status(shown), stage
        left = temp_files(node)
        node.start_daemon()
        wait_for(lambda: node.claim("c1"), "the claim to be read")
        assert (node.claim("c1") or {}).get("statusDevices") == status(shown), stage
        assert not left & temp_files(node), f"{stage}: the killed write's temporary file is still there"
    # The daemon that came back writes as before.
    assert put(node, 9)["status"]["devices"] == status(9) == on_disk(node)
