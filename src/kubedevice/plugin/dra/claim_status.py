"""A driver's report of an allocated device in its claim's `status.devices` (KEP-4817): conditions, data
and network data, and the binding conditions an attach-on-demand driver turns True.

The entries are `kubedevice.resource.device_status`'s objects, written as the API server writes them.
Each write reads the claim, changes this driver's entry for the one device (share) and writes this
driver's entries back: to the node daemon's status API (`PUT /claims/<ns>/<name>/status?driver=`) or the
API server's status subresource, as the backend does it. A condition keeps its `lastTransitionTime` while
its status stays what it was (metav1's SetStatusCondition rule); one without a reason gets `Reported`,
since the API server wants one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from kubedevice.plugin.dra.backend_api import ClaimStatusError, ClaimStatusSink, DRABackend
from kubedevice.plugin.dra.model import AllocatedDevice, ClaimRef
from kubedevice.resource.device_status import (
    AllocatedDeviceStatus,
    DeviceCondition,
    NetworkDeviceData,
    StatusDecodeError,
    read_device_statuses,
)
from kubedevice.resource.times import metav1_time

#: The reason of a condition given none: the API server refuses a condition without one.
DEFAULT_REASON = "Reported"


@dataclass
class ClaimStatusWriter:
    """Writes one driver's entries of claims' `status.devices`, one write at a time."""

    driver: str
    backend: DRABackend
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def write(
        self,
        ref: ClaimRef,
        device: AllocatedDevice,
        *,
        conditions: Sequence[DeviceCondition] | None = None,
        condition: DeviceCondition | None = None,
        data: Any = None,
        network_data: NetworkDeviceData | None = None,
    ) -> None:
        """Set the device's entry: all its `conditions`, or one `condition` among them, its `data` and
        `network_data`; what is None stays as it was reported."""
        if not isinstance(self.backend, ClaimStatusSink):
            raise ClaimStatusError(f"{type(self.backend).__name__} cannot write a claim's status")
        now = metav1_time(self.now())

        def entries(claim: dict[str, Any]) -> list[dict[str, Any]]:
            ours = self._entries(claim, ref, device)
            key = (self.driver, device.pool, device.device, device.share_id or "")
            old = next((e for e in ours if e.key == key), None)
            entry = old or AllocatedDeviceStatus(self.driver, device.pool, device.device, device.share_id)
            kept = entry.conditions
            given = kept if conditions is None else tuple(conditions)
            if condition is not None:
                given = (*(c for c in given if c.type != condition.type), condition)
            entry = replace(
                entry,
                conditions=tuple(_timed(c, kept, now) for c in given),
                data=entry.data if data is None else data,
                network_data=entry.network_data if network_data is None else network_data,
            )
            return [e.to_json() for e in ours if e.key != key] + [entry.to_json()]

        async with self._lock:
            await self.backend.update_claim_status(ref.namespace, ref.name, entries)

    def _entries(
        self, claim: dict[str, Any], ref: ClaimRef, device: AllocatedDevice
    ) -> list[AllocatedDeviceStatus]:
        """This driver's entries now; refuses a replaced claim and a device the claim was not allocated."""
        uid = (claim.get("metadata") or {}).get("uid")
        if ref.uid and uid != ref.uid:
            raise ClaimStatusError(f"claim {ref} was replaced (UID {uid}, not {ref.uid})")
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        wanted = (self.driver, device.pool, device.device, device.share_id)
        if not any(
            (r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID")) == wanted for r in results
        ):
            share = f" (share {device.share_id})" if device.share_id else ""
            raise ClaimStatusError(
                f"claim {ref}: device {device.pool}/{device.device}{share} of {self.driver} is not "
                "allocated to it"
            )
        try:
            return [e for e in read_device_statuses(status.get("devices")) if e.driver == self.driver]
        except StatusDecodeError as err:
            raise ClaimStatusError(f"claim {ref}: status.devices cannot be read: {err}") from None


def _timed(condition: DeviceCondition, kept: Sequence[DeviceCondition], now: str) -> DeviceCondition:
    """The condition with its transition time (kept while its status stays) and a reason."""
    old = next((c for c in kept if c.type == condition.type), None)
    time = condition.last_transition_time or (
        old.last_transition_time if old is not None and old.status == condition.status else now
    )
    return replace(condition, last_transition_time=time or now, reason=condition.reason or DEFAULT_REASON)


__all__ = ["DEFAULT_REASON", "ClaimStatusWriter"]
