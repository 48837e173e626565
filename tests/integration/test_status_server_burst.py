"""The status API's unix socket under a burst: a DRA driver fetches the claims of a burst of pods at once,
each on its own connection, and every fetch must be answered (none may fail for a full accept queue)."""

from __future__ import annotations

import asyncio
import json
import shutil

from kubedevice.statusapi.client import StatusClient
from kubedevice.statusapi.http import Response, StatusServer
from tests.waiting import short_tempdir

#: More connections than asyncio's default accept queue (100) holds, all opened before any is accepted.
BURST = 300


async def test_a_burst_of_connections_is_answered_whole() -> None:
    root = short_tempdir("kd-burst-")
    socket = root / "kubedevice.sock"
    server = StatusServer({}, {"/claims/": lambda rest: Response.json({"name": rest})})
    await server.start(socket)
    daemon = StatusClient(socket, wait=30.0)
    try:
        answers = await asyncio.gather(*(daemon.get(f"/claims/default/c{i}") for i in range(BURST)))
    finally:
        await server.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert [json.loads(a)["name"] for a in answers] == [f"default/c{i}" for i in range(BURST)]
