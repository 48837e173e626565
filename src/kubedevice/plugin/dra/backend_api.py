"""The DRA face's outside world, as the SDK sees it: claims in, ResourceSlices out.

A DRA driver reads each allocated ResourceClaim before preparing it and publishes its
devices as ResourceSlices. Where both live depends on the mode chosen at start: the API
server (cluster mode) or the node daemon's claim endpoint and slice files (standalone).
The SDK talks to either through this one protocol; ``backend/`` implements it and
``make_backend`` there picks the mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kubedevice.plugin.dra.device_model import (
    CounterSet,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
)


@dataclass(frozen=True, slots=True)
class PublishedDevice:
    """One device to publish: a device of the DRA face that is healthy, or tainted for its health.

    ``id`` is ``Device.id``; the backend derives the DNS-label device name and the
    ``deviceID`` attribute from it. Attribute values keep their Python type; a string
    ``"version:1.2.3"`` stays a string here and the backend publishes it as a version.
    ``capacity`` maps a name to a quantity string (``"16Gi"``) or a `DeviceCapacity`. ``taints`` are
    the device's taints as published, each with its `time_added`.
    """

    id: str
    attributes: Mapping[str, str | int | bool]
    capacity: Mapping[str, str | DeviceCapacity]
    numa_nodes: tuple[int, ...] = ()
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    taints: tuple[DeviceTaint, ...] = ()
    allow_multiple_allocations: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False


class ClaimFetchError(Exception):
    """A claim could not be read; ``str()`` is the reason as the source gave it,
    e.g. ``resourceclaims.resource.k8s.io "c1" not found``."""


class DRABackend(Protocol):
    """Where claims come from and slices go to."""

    node_name: str

    async def start(self) -> None:
        """Connect, and begin watching for published slices being deleted."""

    async def stop(self) -> None:
        """Stop watching and close connections; published slices stay."""

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        """The ResourceClaim as ``resource.k8s.io/v1`` JSON: ``metadata.uid``,
        ``status.allocation.devices.results[]`` (``request``, ``driver``, ``pool``,
        ``device``) and ``status.allocation.devices.config[]``.

        Raises ClaimFetchError when it cannot be read.
        """

    async def publish(
        self, devices: Sequence[PublishedDevice], counter_sets: Sequence[CounterSet] = ()
    ) -> None:
        """Replace this driver's slices with these devices and counter sets (in slices of their own); the
        backend publishes them again whenever they vanish."""


@runtime_checkable
class AllocationSource(Protocol):
    """Optional for a backend: which of this driver's devices on this node some claim's allocation names.

    Under ``api="both"`` a device moves from the DRA face to the device plugin face only once no
    allocation names it; from a backend without this method every device counts as held, so none moves.
    """

    async def allocated_devices(self) -> set[str]:
        """Device names (as published) that an allocated claim names; raises when that cannot be read."""
