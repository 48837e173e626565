"""What allocated claims hold, as the scheduler gathers it before a search (upstream's `AllocatedState`,
filled by the scheduler's `allocatedDevices` from every allocated claim): devices taken whole, and the
capacity that shares of devices with allowMultipleAllocations consume."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kubedevice.resource.capacity import ConsumedCapacity
from kubedevice.resource.model import AllocationResult, DeviceID
from kubedevice.resource.quantity import Quantity

__all__ = ["AllocatedState"]


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """`in_use`: devices of results without a shareID (taken whole). `consumed_capacity`: every device of
    results with a shareID, with the capacity all those results consume, summed (empty when they record
    none); such a device may be shared further while its capacity lasts. Results with adminAccess hold
    nothing (`foreachAllocatedDevice`)."""

    in_use: frozenset[DeviceID] = frozenset()
    consumed_capacity: Mapping[DeviceID, ConsumedCapacity] = field(default_factory=dict)

    @classmethod
    def gather(
        cls, allocations: Iterable[AllocationResult], in_use: Iterable[DeviceID] = ()
    ) -> AllocatedState:
        """The state of these allocations, plus `in_use` devices known to be taken whole."""
        whole = set(in_use)
        shared: dict[DeviceID, dict[str, Quantity]] = {}
        for allocation in allocations:
            for r in allocation.results:
                if r.admin_access:
                    continue
                device = (r.driver, r.pool, r.device)
                if r.share_id is None:
                    whole.add(device)
                    continue
                totals = shared.setdefault(device, {})
                for name, amount in (r.consumed_capacity or {}).items():
                    totals[name] = totals[name] + amount if name in totals else amount
        return cls(frozenset(whole), shared)
