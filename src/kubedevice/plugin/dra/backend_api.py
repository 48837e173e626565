"""The DRA face's outside world, as the SDK sees it: claims in, ResourceSlices out.

A DRA driver reads each allocated ResourceClaim before preparing it and publishes its
devices as ResourceSlices. Where both live depends on the mode chosen at start: the API
server (cluster mode) or the node daemon's claim endpoint and slice files (standalone).
The SDK talks to either through this one protocol; ``backend/`` implements it and
``make_backend`` there picks the mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
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


class ClaimStatusError(Exception):
    """A claim's status could not be written; ``str()`` is one line: the refusal as the API server (or the
    node daemon in its place) worded it, or why it could not be asked."""


#: Given the claim as just read (resource.k8s.io/v1 JSON), this driver's `status.devices` entries to write.
StatusEntries = Callable[[dict[str, Any]], list[dict[str, Any]]]


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


@runtime_checkable
class PublishedTaints(Protocol):
    """Optional for a backend: the times of the taints this driver published before it (re)started, so
    that a taint published again keeps its `timeAdded` (and a NoExecute taint's countdown its start)."""

    async def published_taint_times(self) -> dict[tuple[str, str, str, str], datetime]:
        """(device name, key, value, effect) -> timeAdded of each taint in this driver's published slices
        on this node; empty when they cannot be read."""


@runtime_checkable
class ClaimStatusSink(Protocol):
    """Optional for a backend: writing this driver's part of a claim's `status.devices`, and listing the
    allocated claims (for a driver that acts before prepare: binding conditions)."""

    async def update_claim_status(self, namespace: str, name: str, entries: StatusEntries) -> None:
        """Read the claim, and replace this driver's `status.devices` entries with `entries(claim)`; other
        drivers' entries stay. Raises ClaimFetchError when the claim cannot be read, ClaimStatusError when
        the write is refused; what `entries` raises goes through."""

    async def list_claims(self) -> list[dict[str, Any]]:
        """Every allocated claim the backend can see, as resource.k8s.io/v1 JSON (metadata, status's
        allocation and devices). Raises ClaimFetchError when they cannot be read."""
