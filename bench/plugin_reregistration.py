"""How fast a plugin re-registers after kubelet.sock is created again.

Runs `kubedevice plugin fake` as a real process against a minimal registration server, restarts that
server N times, and prints the median and max delay from the new kubelet.sock's creation (its ctime)
to the Register call arriving, under inotify and under the polling fallback.

    .venv/bin/python bench/plugin_reregistration.py [--restarts 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")


class Registrations(dp_grpc.RegistrationServicer):
    def __init__(self) -> None:
        self.arrivals: asyncio.Queue[int] = asyncio.Queue()

    async def Register(self, request: dp.RegisterRequest, context: Any) -> dp.Empty:
        arrived = time.time_ns()
        await self.arrivals.put(arrived)
        return dp.Empty()


async def start_kubelet(socket: str, servicer: Registrations) -> grpc.aio.Server:
    server = grpc.aio.server()
    dp_grpc.add_RegistrationServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    return server


async def measure(restarts: int, inotify: bool) -> list[float]:
    directory = tempfile.mkdtemp(prefix="kdb-", dir="/tmp")
    socket = os.path.join(directory, "kubelet.sock")
    servicer = Registrations()
    kubelet = await start_kubelet(socket, servicer)
    flags = ["--inotify" if inotify else "--no-inotify", "--log-level", "warning"]
    plugin = await asyncio.create_subprocess_exec(
        KUBEDEVICE, "plugin", "fake", "--resource", "example.com/fake", "--devices", "8",
        "--plugin-dir", directory, *flags, stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    delays = []
    try:
        await asyncio.wait_for(servicer.arrivals.get(), 30)
        for _ in range(restarts):
            # Restart at a random phase of the plugin's poll cycle, as a real kubelet would.
            await asyncio.sleep(random.uniform(0, 0.5))
            await kubelet.stop(grace=None)
            kubelet = await start_kubelet(socket, servicer)
            created = os.stat(socket).st_ctime_ns
            arrived = await asyncio.wait_for(servicer.arrivals.get(), 30)
            delays.append((arrived - created) / 1e6)
    finally:
        plugin.terminate()
        await plugin.wait()
        await kubelet.stop(grace=None)
        shutil.rmtree(directory, ignore_errors=True)
    return delays


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=20)
    args = parser.parse_args()
    for inotify in (True, False):
        delays = await measure(args.restarts, inotify)
        mode = "inotify" if inotify else "polling (500 ms)"
        print(
            f"re-registration after kubelet.sock re-created, {mode}: n={len(delays)} "
            f"median={statistics.median(delays):.1f} ms max={max(delays):.1f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
