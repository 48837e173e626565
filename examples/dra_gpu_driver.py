"""A complete DRA driver for made-up GPUs, each a folder holding `model`, `memory` and `numa_node`.

examples/gpus/ is a small tree to try it with, beside `kubedevice node --root-dir DIR`:

    python examples/dra_gpu_driver.py --root examples/gpus --kubelet-dir DIR --cdi-spec-dir DIR/cdi

Each claim gets a CDI spec of its own, telling the container its GPUs and the sharing mode that the
claim's opaque config asks for. The SDK registers the driver, publishes the GPUs, fetches each claim
and keeps prepare idempotent across restarts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from kubedevice.plugin import Device, DevicePlugin, serve
from kubedevice.plugin.cdi import CDIDevice, CDISpec, ContainerEdits, write_spec
from kubedevice.plugin.dra import Claim, ClaimRef, PreparedDevice


class GpuDriver(DevicePlugin):
    driver_name = "gpu.example.com"
    poll_interval = 1.0

    def __init__(self, root: str, cdi_dir: str) -> None:
        self.root, self.cdi_dir = root, Path(cdi_dir)

    async def devices(self) -> Sequence[Device]:
        return await asyncio.to_thread(self._scan)

    def _scan(self) -> list[Device]:
        def read(name: str, file: str) -> str:
            with open(os.path.join(self.root, name, file)) as handle:
                return handle.read().strip()

        return [
            Device(
                name,
                numa_nodes=(int(read(name, "numa_node")),),
                attributes={"model": read(name, "model")},
                capacity={"memory": read(name, "memory")},
            )
            for name in sorted(os.listdir(self.root))
        ]

    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        sharing = "Exclusive"
        for entry in claim.config:
            sharing = (entry.get("opaque") or {}).get("parameters", {}).get("sharing", sharing)
        gpus = ",".join(r.device_id or r.device for r in claim.results)
        edits = ContainerEdits(env=(f"GPUS={gpus}", f"GPU_SHARING={sharing}"))
        spec = CDISpec(kind="gpu.example.com/claim", devices=(CDIDevice(claim.uid, edits),))
        await asyncio.to_thread(write_spec, spec, self.cdi_dir, file_name=self._spec_file(claim.uid))
        # The claim's CDI device goes with its first GPU, so a container gets the edits once.
        cdi = [f"gpu.example.com/claim={claim.uid}"]
        return [PreparedDevice(r, cdi if n == 0 else ()) for n, r in enumerate(claim.results)]

    async def unprepare(self, claim: ClaimRef) -> None:
        await asyncio.to_thread((self.cdi_dir / self._spec_file(claim.uid)).unlink, missing_ok=True)

    def _spec_file(self, uid: str) -> str:
        return f"gpu-example-claim-{uid}.json"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="folder with one folder per GPU")
    parser.add_argument("--kubelet-dir", help="the kubelet's folder (default: $KUBEDEVICE_KUBELET_DIR)")
    parser.add_argument("--cdi-spec-dir", default="/var/run/cdi", help="where claims' CDI specs go")
    args = parser.parse_args()
    serve(GpuDriver(args.root, args.cdi_spec_dir), api="dra", kubelet_dir=args.kubelet_dir)
