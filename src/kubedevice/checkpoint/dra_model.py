"""The DRA manager's checkpoint data: what the kubelet's `ClaimInfoStateList` holds.

Go distinguishes a nil slice or map from an empty one and the JSON shows it (``null`` versus ``[]``/``{}``),
so ``None`` is kept apart from empty containers, as in :mod:`.model`. No ``prepared`` flag is stored: every
claim read back from the file is unprepared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DRADevice:
    """One device a driver prepared for a claim (an element of the driver's ``Devices``)."""

    pool_name: str
    device_name: str
    #: The claim's requests this device serves; None is Go's nil slice (JSON null) and means every request.
    request_names: tuple[str, ...] | None = None
    #: The CDI device IDs the driver returned; None is Go's nil slice (JSON null).
    cdi_device_ids: tuple[str, ...] | None = None
    #: The consumable-capacity share; always written as ``ShareID``, null when None.
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimInfoState:
    """One prepared (or being prepared) claim, as the kubelet's claim-info cache records it."""

    claim_uid: str
    claim_name: str
    namespace: str
    #: The pods using the claim; None is Go's nil set (JSON null), written as ``{"<uid>":{}}`` otherwise.
    pod_uids: frozenset[str] | None
    #: Driver name -> its devices (None: the driver returned none, JSON null); None is Go's nil map.
    driver_state: Mapping[str, tuple[DRADevice, ...] | None] | None

    @property
    def key(self) -> str:
        """The cache key, ``"<namespace>/<name>"``; entries are written sorted by it."""
        return f"{self.namespace}/{self.claim_name}"


@dataclass(frozen=True, slots=True)
class DRACheckpointData:
    """The whole claim-info cache as checkpointed."""

    #: None is Go's nil slice: ``"ClaimInfoStateList":null``, the file the kubelet creates when none exists.
    claims: tuple[ClaimInfoState, ...] | None = None
