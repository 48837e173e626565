"""A shared-GPU DRA driver for made-up GPUs: each GPU may be allocated to several claims at once
(`allow_multiple_allocations`), each taking a share of its 80Gi of memory in 1Gi steps (4Gi when the claim
asks for no amount), until the memory is used up.

Beside `kubedevice node --root-dir DIR` (README.md has the commands):

    python examples/dra_shared_gpu_driver.py --gpus 1 --kubelet-dir DIR

`prepare` gets each share's ID and the memory it consumes, gives the container a CDI device that sets its
memory limit, and reports the share in the claim's status (`kubedevice claims` shows it).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path

from kubedevice.plugin import Device, DevicePlugin, serve
from kubedevice.plugin.cdi import CDIDevice, CDISpec, ContainerEdits, write_spec
from kubedevice.plugin.dra import (
    CapacityRange,
    CapacityRequestPolicy,
    Claim,
    ClaimRef,
    DeviceCapacity,
    DeviceCondition,
    PreparedDevice,
)
from kubedevice.plugin.dra.paths import cdi_spec_dir, resolve_kubelet_dir

KIND = "vgpu.example.com/share"
MEMORY = DeviceCapacity(
    "80Gi", CapacityRequestPolicy(default="4Gi", valid_range=CapacityRange(min="1Gi", step="1Gi"))
)


class SharedGpus(DevicePlugin):
    driver_name = "vgpu.example.com"

    def __init__(self, gpus: int, cdi_dir: Path) -> None:
        self.gpus, self.cdi_dir = gpus, cdi_dir

    async def devices(self) -> Sequence[Device]:
        return [
            Device(f"gpu-{i}", capacity={"memory": MEMORY}, allow_multiple_allocations=True)
            for i in range(self.gpus)
        ]

    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        shares, prepared = [], []
        ready = DeviceCondition("Ready", "True", reason="Prepared", message="memory limit set")
        for n, result in enumerate(claim.results):
            memory = result.consumed_capacity.get("memory", "80Gi")  # a whole GPU when not shared
            env = (f"GPU={result.device}", f"GPU_SHARE={result.share_id}", f"GPU_MEMORY_LIMIT={memory}")
            shares.append(CDIDevice(f"{claim.uid}-{n}", ContainerEdits(env=env)))
            prepared.append(PreparedDevice(result, (f"{KIND}={claim.uid}-{n}",)))
            await self.set_device_status(claim.ref, result, conditions=[ready], data={"memoryLimit": memory})
        spec = CDISpec(kind=KIND, devices=tuple(shares), cdi_version="0.6.0")  # names may start with a digit
        await asyncio.to_thread(write_spec, spec, self.cdi_dir, file_name=self._spec_file(claim.uid))
        return prepared

    async def unprepare(self, claim: ClaimRef) -> None:
        await asyncio.to_thread((self.cdi_dir / self._spec_file(claim.uid)).unlink, missing_ok=True)

    def _spec_file(self, uid: str) -> str:
        return f"vgpu-example-{uid}.json"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1, help="how many GPUs")
    parser.add_argument("--kubelet-dir", help="the kubelet's folder (default: $KUBEDEVICE_KUBELET_DIR)")
    parser.add_argument("--cdi-spec-dir", help="where the claims' CDI specs go (default: <kubelet dir>/cdi)")
    args = parser.parse_args()
    # The folder the SDK picks for its own CDI specs: <kubelet dir>/cdi beside `kubedevice node`.
    folder = cdi_spec_dir(args.cdi_spec_dir, resolve_kubelet_dir(args.kubelet_dir), cluster=False)
    serve(SharedGpus(args.gpus, folder), api="dra", kubelet_dir=args.kubelet_dir)
