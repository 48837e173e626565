"""The DRA manager's checkpoint data (`dra_manager_state`): the claim-info cache as the kubelet stores it.

None is kept apart from empty, as Go's nil is from an empty slice or map: each is written as it was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DRADevice:
    """One device a driver prepared for a claim."""

    pool_name: str
    device_name: str
    #: The claim's requests this device serves; None is Go's nil (written null) and means every request.
    request_names: tuple[str, ...] | None = None
    cdi_device_ids: tuple[str, ...] | None = None
    #: The share of a device with consumable capacity; always written, null when None.
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimInfoState:
    """One entry of ClaimInfoStateList: a claim, the pods using it and each driver's devices."""

    claim_uid: str
    claim_name: str
    namespace: str
    pod_uids: frozenset[str] | None
    driver_state: Mapping[str, tuple[DRADevice, ...] | None] | None


@dataclass(frozen=True, slots=True)
class DRACheckpointData:
    #: None is a fresh file's `"ClaimInfoStateList":null`.
    claims: tuple[ClaimInfoState, ...] | None = None
