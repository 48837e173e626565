"""A DRA manager and its raw plugin in one process, killed at a checkpoint write stage (crash tests).

    python -m tests.dra_crash_child ROOT STAGE N

prepares PODS pods, one single-device claim each, and prints `prepared <pod uid>` once each prepare has
returned (what a kubelet would have acted on); the N-th time the checkpoint store reaches STAGE it dies
with os._exit, as a SIGKILL would leave it (no cleanup, no flush of anything but what was written).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from kubedevice.dra import DRAManager, DRAPod
from tests.dra_manager_env import DictClaims, allocated, gpu, pod
from tests.dra_plugin import DRATestPlugin

PODS = 4
DRIVER = "gpu.example.com"


def crash_pods() -> list[DRAPod]:
    return [pod(f"P{i}", f"c{i}") for i in range(PODS)]


def crash_claims() -> DictClaims:
    claims = DictClaims()
    for i, p in enumerate(crash_pods()):
        claims.put(allocated(f"c{i}", f"u{i}", [p], ("gpu", DRIVER, f"gpu-{i}")))
    return claims


async def main(root: Path, stage: str, nth: int) -> None:
    seen = 0

    def fault(reached: str) -> None:
        nonlocal seen
        if reached == stage:
            seen += 1
            if seen == nth:
                os._exit(9)

    plugin = DRATestPlugin(root / "plugins_registry", root, driver=DRIVER)
    for i in range(PODS):
        plugin.set_devices(f"u{i}", gpu(f"gpu-{i}"))
    await plugin.start_endpoint()
    manager = DRAManager(root, claims=crash_claims(), checkpoint_fault=fault)
    await manager.start()
    manager.plugin_handler.validate_plugin(DRIVER, plugin.endpoint, ["v1.DRAPlugin"])
    await manager.plugin_handler.register_plugin(DRIVER, plugin.endpoint, ["v1.DRAPlugin"])
    for p in crash_pods():
        await manager.prepare_resources(p)
        print(f"prepared {p.uid}", flush=True)
    print("done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
