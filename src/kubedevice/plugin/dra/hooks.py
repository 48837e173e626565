"""What a running DRA face offers the driver's own code, through `DevicePlugin`'s methods: taints set at
run time, a claim's device status and binding conditions, and the allocations of this driver's devices.

`DRAServer` makes one per plugin it serves and hands it to the plugin; the plugin's methods call it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubedevice.plugin.dra.backend_api import ClaimStatusSink, DRABackend
from kubedevice.plugin.dra.claim_status import ClaimStatusWriter
from kubedevice.plugin.dra.device_model import DeviceTaint
from kubedevice.plugin.dra.model import AllocatedDevice, Claim, ClaimRef, claim_from_json
from kubedevice.plugin.dra.taints import TaintBook
from kubedevice.resource.device_status import DeviceCondition, NetworkDeviceData


class DriverHooks:
    """The plugin's DRA face at run time: `republish` publishes the devices again."""

    def __init__(
        self,
        driver: str,
        backend: DRABackend,
        taints: TaintBook,
        republish: Callable[[], None],
        names: Callable[[], Mapping[str, str]],
    ) -> None:
        self.driver = driver
        self.backend = backend
        self.taints = taints
        self._republish = republish
        self._names = names
        self.status = ClaimStatusWriter(driver, backend)

    def set_device_taints(self, device_id: str, taints: Sequence[DeviceTaint]) -> None:
        self.taints.set(device_id, taints)
        self._republish()

    async def set_device_status(
        self,
        claim: ClaimRef,
        device: AllocatedDevice,
        *,
        conditions: Sequence[DeviceCondition] | None,
        data: Any,
        network_data: NetworkDeviceData | None,
    ) -> None:
        await self.status.write(claim, device, conditions=conditions, data=data, network_data=network_data)

    async def set_device_condition(
        self, claim: ClaimRef, device: AllocatedDevice, condition: DeviceCondition
    ) -> None:
        await self.status.write(claim, device, condition=condition)

    async def allocated_claims(self) -> list[Claim]:
        """The allocated claims with a result of this driver in its pool (the node's), in name order."""
        if not isinstance(self.backend, ClaimStatusSink):
            return []
        pool = self.backend.node_name
        claims = []
        for data in await self.backend.list_claims():
            claim = claim_from_json(data, self.driver, self._names())
            results = tuple(r for r in claim.results if r.pool == pool)
            if results:
                claims.append(
                    Claim(claim.uid, claim.namespace, claim.name, results, claim.config, data, self.driver)
                )
        return sorted(claims, key=lambda c: (c.namespace, c.name))
