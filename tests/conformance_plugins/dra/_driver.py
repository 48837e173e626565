"""A small, correct DRA driver on the SDK: two GPUs, a CDI spec defining them, the default prepare.

Each script beside this file breaks one thing of it, so the conformance checker can be shown to catch
that thing. Run as `python <script>.py CDI_SPEC_DIR`; the kubelet folder comes from $KUBEDEVICE_KUBELET_DIR.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from kubedevice.plugin import Allocation, Device, DevicePlugin, serve
from kubedevice.plugin.cdi import CDIDevice, CDISpec, ContainerEdits

DRIVER = "gpu.example.com"


class Gpus(DevicePlugin):
    driver_name = DRIVER

    def __init__(self, cdi_spec_dir: str) -> None:
        self.cdi_spec_dir = cdi_spec_dir

    async def devices(self) -> Sequence[Device]:
        return [Device("gpu-0"), Device("gpu-1")]

    def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
        edits = {d.id: ContainerEdits(env=(f"GPU={d.id}",)) for d in devices}
        return CDISpec(kind=f"{DRIVER}/gpu", devices=tuple(CDIDevice(i, e) for i, e in edits.items()))

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation(cdi_devices=[f"{DRIVER}/gpu={d.id}" for d in devices])


def main(plugin_class: type[Gpus], **dra_options: Any) -> None:
    if len(sys.argv) != 2:
        print("usage: <script> CDI_SPEC_DIR", file=sys.stderr)
        sys.exit(2)
    plugin = plugin_class(sys.argv[1])
    serve(plugin, api="dra", dra_options={"cdi_spec_dir": sys.argv[1], **dra_options})


if __name__ == "__main__":
    main(Gpus)
