"""`status`, `pods` and `claims` piped (a script, `| grep`, a CI log): no UID, device ID or CDI ID is broken
over two lines, with `COLUMNS` unset or set, and `COLUMNS` widens the tables as it does on a terminal.

The commands run as processes against a status API serving recorded answers on a real socket, so the
answers can hold the long IDs real drivers use (GPU UUIDs, CDI IDs with a claim's UID).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.statusapi import contract
from kubedevice.statusapi.http import Response, StatusServer
from kubedevice.statusapi.paths import NodePaths
from tests.node_helpers import CLI, short_tmpdir

CLAIM_UID = "c1c1c1c1-0000-4000-8000-000000000001"
POD_UIDS = [f"0b7e6a52-0000-4000-8000-00000000000{i}" for i in range(1, 7)]
#: What a driver names a claim's device by (the dra-example-driver's shape): 67 characters.
CDI_ID = f"k8s.gpu.example.com/claim={CLAIM_UID}-gpu-0"
GPUS = [f"GPU-{i}b7e6a52-1111-4000-8000-00000000000{i}" for i in range(4)]
ENDPOINT = "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
RESOURCE = "nvidia.com/gpu"

CLAIMS = {
    "claims": [
        {
            "namespace": "default",
            "name": "shared",
            "uid": CLAIM_UID,
            "file": "claims.yaml",
            "generatedFor": None,
            "extendedFor": None,
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
                    ]
                }
            },
            "allocatedBy": "manifest",
            "reservedFor": [
                {"resource": "pods", "name": f"p{i}", "uid": u} for i, u in enumerate(POD_UIDS, 1)
            ],
            "reservedBy": "daemon",
            "cached": True,
            "cachedUID": CLAIM_UID,
            "prepared": True,
            "preparedState": "yes",
            "pods": [{"uid": u, "pod": f"default/p{i}"} for i, u in enumerate(POD_UIDS, 1)],
            "devices": [],
            "cdiDevices": [CDI_ID, "k8s.gpu.example.com/gpu=common"],
        }
    ]
}
PODS: dict[str, Any] = {
    "pods": [
        {
            "namespace": "gpu-test1",
            "name": "pod0",
            "uid": POD_UIDS[0],
            "phase": "Failed",
            "terminating": False,
            "reason": "UnexpectedAdmissionError",
            "message": "requested number of devices unavailable for nvidia.com/gpu. "
            "Requested: 4, Available: 3, which is unexpected",
            "detail": "",
            "warnings": [],
            "containers": [
                {
                    "name": "main",
                    "devices": {RESOURCE: GPUS[:3]},
                    "topologyHint": None,
                    "claims": [
                        {
                            "claim": "gpu-test1/single-gpu-claim",
                            "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}],
                        }
                    ],
                }
            ],
        }
    ],
    "manifestErrors": [],
}
NODE = {
    "nodeName": "node-1",
    "capacity": {RESOURCE: 4},
    "allocatable": {RESOURCE: 3},
    "resources": {
        RESOURCE: {
            "healthy": GPUS,
            "unhealthy": [],
            "endpoint": ENDPOINT,
            "stoppedSeconds": None,
            "allocated": 3,
            "free": 0,
        }
    },
    "checkpoint": {"path": "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint", "error": None},
    "topology": None,
    "draDrivers": {},
    "unregisteredSliceDrivers": {},
}
#: What each command must show whole, on one line.
IDS = {
    "claims": [CLAIM_UID, CDI_ID, "default/shared", "gpu.example.com/node-1/gpu-0", "reserved for"],
    "pods": [*GPUS[:3], "gpu-test1/pod0"],
    "status": [*GPUS, ENDPOINT],
}


@pytest.fixture
async def root() -> AsyncIterator[Path]:
    """A root whose status socket answers the recorded `/node`, `/pods` and `/claims`."""
    folder = short_tmpdir("kd-pipe-")
    server = StatusServer(
        {
            contract.NODE: lambda: Response.json(NODE),
            contract.PODS: lambda: Response.json(PODS),
            contract.CLAIMS: lambda: Response.json(CLAIMS),
        }
    )
    await server.start(NodePaths.under(folder).status_socket)
    try:
        yield folder
    finally:
        await server.stop()


async def _piped(root: Path, command: str, columns: str | None) -> list[str]:
    """The command's lines with stdout a pipe, `COLUMNS` as given (unset: None)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
    proc = await asyncio.create_subprocess_exec(
        *CLI, command, "--root-dir", str(root), stdout=asyncio.subprocess.PIPE, stderr=sys.stderr, env=env
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0
    return out.decode().splitlines()


@pytest.mark.parametrize("command", ["claims", "pods", "status"])
async def test_piped_tables_keep_every_id_on_one_line_and_follow_columns(root: Path, command: str) -> None:
    unset = await _piped(root, command, None)
    wide = await _piped(root, command, "200")
    for lines in (unset, wide):
        text = "\n".join(lines)
        broken = [i for i in IDS[command] if not any(i in line for line in lines)]
        assert broken == [], text
    # COLUMNS=200 lays the table out wider than a pipe gets otherwise (120 columns, or its longest words).
    assert max(map(len, unset)) < max(map(len, wide)) <= 200, "\n".join(unset + wide)
