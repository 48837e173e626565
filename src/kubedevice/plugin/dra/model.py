"""The plain data of the DRA face: the claim a `prepare` hook gets and what it answers.

Like `plugin.model`, these are not wire types. The claim is read from its source (API server or node
daemon) before the hook runs, cut down to this driver's part, with each allocated device mapped back
to the `Device.id` the plugin reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ClaimRef:
    """What identifies a claim; all an unprepare gets, since the claim may be deleted by then."""

    uid: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class AllocatedDevice:
    """One device the scheduler allocated to a claim for this driver.

    `request` is the request name as allocated (``req`` or ``req/sub``); `device_id` is the plugin's
    own `Device.id` behind the published `device` name, or None for a device the plugin does not
    report (any more).
    """

    request: str
    pool: str
    device: str
    device_id: str | None
    admin_access: bool = False
    share_id: str | None = None

    @property
    def request_name(self) -> str:
        """The request without its sub-request part: what the kubelet expects back."""
        return self.request.split("/", 1)[0]


@dataclass(frozen=True)
class Claim:
    """An allocated ResourceClaim, as far as this driver is concerned.

    `results` are this driver's allocated devices in allocation order; `config` the allocation's
    config entries (``status.allocation.devices.config``: source, requests, opaque parameters) whose
    opaque part is for this driver or absent; `raw` the whole claim as fetched.
    """

    uid: str
    namespace: str
    name: str
    results: tuple[AllocatedDevice, ...]
    config: tuple[Mapping[str, Any], ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ref(self) -> ClaimRef:
        return ClaimRef(self.uid, self.namespace, self.name)

    def requests(self) -> dict[str, list[AllocatedDevice]]:
        """Results grouped by request name (sub-requests cut), in allocation order."""
        grouped: dict[str, list[AllocatedDevice]] = {}
        for result in self.results:
            grouped.setdefault(result.request_name, []).append(result)
        return grouped

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PreparedDevice:
    """One prepared device of a claim: which allocated device, and the CDI device IDs it gives."""

    result: AllocatedDevice
    cdi_device_ids: Sequence[str] = ()


def claim_from_json(data: Mapping[str, Any], driver: str, device_ids: Mapping[str, str]) -> Claim:
    """This driver's view of a fetched ``resource.k8s.io/v1`` ResourceClaim.

    `device_ids` maps a published device name back to the plugin's `Device.id`.
    """
    meta = data.get("metadata") or {}
    allocation = (data.get("status") or {}).get("allocation") or {}
    devices = allocation.get("devices") or {}
    results = tuple(
        AllocatedDevice(
            request=str(r.get("request", "")),
            pool=str(r.get("pool", "")),
            device=str(r.get("device", "")),
            device_id=device_ids.get(str(r.get("device", ""))),
            admin_access=bool(r.get("adminAccess", False)),
            share_id=r.get("shareID"),
        )
        for r in devices.get("results") or []
        if r.get("driver") == driver
    )
    config = tuple(
        entry
        for entry in devices.get("config") or []
        if (entry.get("opaque") or {}).get("driver", driver) == driver
    )
    return Claim(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        results=results,
        config=config,
        raw=data,
    )
