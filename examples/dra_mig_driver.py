"""A MIG-style DRA driver for made-up GPUs: each GPU is a counter set (its memory and its compute slices)
and its devices are profiles of it, the whole GPU and four 1g.10gb slices, all consuming that set. The
scheduler then never hands out a slice beside its whole GPU, nor more slices than the GPU has.

Beside `kubedevice node --root-dir DIR` (README.md has the commands):

    python examples/dra_mig_driver.py --gpus 2 --kubelet-dir DIR

A GPU whose index is in the health file (a JSON list, read at every poll) is unhealthy: its devices stay
published with a NoExecute taint, so the pods on them are evicted and nothing new is allocated there;
the taint goes when the GPU leaves the list.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from kubedevice.plugin import Allocation, Device, DevicePlugin, serve
from kubedevice.plugin.dra import CounterSet, DeviceCounterConsumption, DeviceTaint

SLICES = 4  # 1g.10gb slices of one GPU
SLICE_MEMORY_GI = 10


class MigDriver(DevicePlugin):
    driver_name = "mig.example.com"
    health_taint = DeviceTaint("mig.example.com/unhealthy", "NoExecute")
    poll_interval = 1.0

    def __init__(self, gpus: int, health_file: str | None) -> None:
        self.gpus, self.health_file = gpus, health_file

    async def devices(self) -> Sequence[Device]:
        broken = await asyncio.to_thread(self._broken)
        devices = []
        for gpu in range(self.gpus):

            def profile(name: str, kind: str, slices: int, gpu: int = gpu) -> Device:
                memory = f"{slices * SLICE_MEMORY_GI}Gi"
                return Device(
                    name,
                    healthy=gpu not in broken,
                    attributes={"gpu": gpu, "profile": kind},
                    capacity={"memory": memory},
                    consumes_counters=[
                        DeviceCounterConsumption(f"gpu-{gpu}", {"memory": memory, "slices": str(slices)})
                    ],
                )

            # Slices first: the scheduler takes the first device that fits, a slice before a whole GPU.
            devices += [profile(f"gpu-{gpu}-mig-{s}", "1g.10gb", 1) for s in range(SLICES)]
            devices.append(profile(f"gpu-{gpu}", "whole", SLICES))
        return devices

    def shared_counters(self, devices: Sequence[Device]) -> Sequence[CounterSet]:
        whole = {"memory": f"{SLICES * SLICE_MEMORY_GI}Gi", "slices": str(SLICES)}
        return [CounterSet(f"gpu-{gpu}", whole) for gpu in range(self.gpus)]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        # The default prepare puts these into the claim's CDI spec: the container sees its MIG devices.
        return Allocation(envs={"MIG_DEVICES": ",".join(d.id for d in devices)})

    def _broken(self) -> set[int]:
        if self.health_file is None or not Path(self.health_file).exists():
            return set()
        text = Path(self.health_file).read_text()
        return set(json.loads(text)) if text.strip() else set()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=2, help="how many GPUs")
    parser.add_argument("--health-file", help="a JSON list of the unhealthy GPUs' indexes")
    parser.add_argument("--kubelet-dir", help="the kubelet's folder (default: $KUBEDEVICE_KUBELET_DIR)")
    args = parser.parse_args()
    serve(MigDriver(args.gpus, args.health_file), api="dra", kubelet_dir=args.kubelet_dir)
