"""The SDK's default prepare keeps shares of a device apart: one CDI device per share, in the claim's spec."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.dra.cdi_claims import prepare_with_allocate
from kubedevice.plugin.dra.model import AllocatedDevice, Claim
from kubedevice.plugin.model import Allocation, Device

DRIVER = "gpu.example.com"
UID = "0c1a1000-0000-4000-8000-000000000001"
S1 = "5a5a5a5a-0000-4000-8000-000000000001"
S2 = "5a5a5a5a-0000-4000-8000-000000000002"


class Physical(DevicePlugin):
    """A plugin whose allocate() names each physical device's own CDI device, and nothing else."""

    driver_name = DRIVER

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation(cdi_devices=[f"{DRIVER}/gpu={d.id}" for d in devices])


def test_each_share_gets_its_own_cdi_device_after_the_physical_ones() -> None:
    claim = Claim(
        UID,
        "default",
        "c",
        (
            AllocatedDevice(
                "a",
                "node-1",
                "gpu-0",
                "gpu-0",
                share_id=S1,
                consumed_capacity={"memory": "10Gi", "compute": "5"},
            ),
            AllocatedDevice("b", "node-1", "gpu-0", "gpu-0", share_id=S2),
            AllocatedDevice("b", "node-1", "gpu-1", "gpu-1"),
        ),
    )
    inventory = {"gpu-0": Device("gpu-0"), "gpu-1": Device("gpu-1")}
    result = asyncio.run(prepare_with_allocate(Physical(), DRIVER, claim, inventory))
    assert [list(p.cdi_device_ids) for p in result.devices] == [
        [f"{DRIVER}/gpu=gpu-0", f"{DRIVER}/claim={UID}-{S1}"],
        [f"{DRIVER}/gpu=gpu-0", f"{DRIVER}/gpu=gpu-1", f"{DRIVER}/claim={UID}-{S2}"],
        [],  # not a share, and the request's IDs went with its first device
    ]
    assert result.spec is not None and result.spec.kind == f"{DRIVER}/claim"
    assert [(d.name, d.edits.env) for d in result.spec.devices] == [
        (
            f"{UID}-{S1}",
            (
                f"KUBEDEVICE_SHARE_GPU_0={S1}",
                "KUBEDEVICE_SHARE_GPU_0_COMPUTE=5",
                "KUBEDEVICE_SHARE_GPU_0_MEMORY=10Gi",
            ),
        ),
        (f"{UID}-{S2}", (f"KUBEDEVICE_SHARE_GPU_0={S2}",)),
    ]


def test_a_claim_without_shares_has_no_spec_when_allocate_gives_no_edits() -> None:
    claim = Claim(UID, "default", "c", (AllocatedDevice("a", "node-1", "gpu-0", "gpu-0"),))
    result = asyncio.run(prepare_with_allocate(Physical(), DRIVER, claim, {"gpu-0": Device("gpu-0")}))
    assert [list(p.cdi_device_ids) for p in result.devices] == [[f"{DRIVER}/gpu=gpu-0"]]
    assert result.spec is None
