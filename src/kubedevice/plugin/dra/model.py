"""The plain data of the DRA face: the claim a `prepare` hook gets and what it answers.

Like `plugin.model`, these are not wire types. The claim is read from its source (API server or node
daemon) before the hook runs, cut down to this driver's part, with each allocated device mapped back
to the `Device.id` the plugin reported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubedevice.resource.device_status import AllocatedDeviceStatus, StatusDecodeError, read_device_statuses


@dataclass(frozen=True)
class ClaimRef:
    """What identifies a claim; all an unprepare gets, since the claim may be deleted by then."""

    #: The claim object's UID: a claim deleted and made again under its name is another claim.
    uid: str
    #: The claim's namespace.
    namespace: str
    #: The claim's name.
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class AllocatedDevice:
    """One device the scheduler allocated to a claim for this driver.

    `request` is the request name as allocated (``req`` or ``req/sub``); `device_id` is the plugin's
    own `Device.id` behind the published `device` name, or None for a device the plugin does not
    report (any more). A device allocated to several requests at once (`allow_multiple_allocations`)
    gives each its `share_id` and `consumed_capacity` (capacity name -> quantity: what this share
    uses of the device). `binding_conditions` are those the scheduler copied from the device: they
    must be True on the device's status (`DevicePlugin.set_device_condition`) before the pod is bound.
    """

    request: str
    #: The pool of the device: the node's name, as this driver publishes its devices.
    pool: str
    #: The device's name as published (a DNS label made from its ID).
    device: str
    device_id: str | None
    #: The request asked for admin access: the device is handed out also when others use it.
    admin_access: bool = False
    #: The share of a device allocated to several requests at once; None for a whole device.
    share_id: str | None = None
    #: Capacity name -> quantity this share consumes of the device (`consumedCapacity`).
    consumed_capacity: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: Condition types that must be True on the device's status before the pod is bound.
    binding_conditions: tuple[str, ...] = ()
    #: Condition types that, True, fail the binding (the claim is allocated again).
    binding_failure_conditions: tuple[str, ...] = ()

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

    #: The claim object's UID.
    uid: str
    #: The claim's namespace.
    namespace: str
    #: The claim's name.
    name: str
    results: tuple[AllocatedDevice, ...]
    config: tuple[Mapping[str, Any], ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The driver the results are of ("" in a claim made by hand).
    driver: str = ""

    @property
    def ref(self) -> ClaimRef:
        """What identifies the claim (for `set_device_status`, `set_device_condition`)."""
        return ClaimRef(self.uid, self.namespace, self.name)

    def requests(self) -> dict[str, list[AllocatedDevice]]:
        """Results grouped by request name (sub-requests cut), in allocation order."""
        grouped: dict[str, list[AllocatedDevice]] = {}
        for result in self.results:
            grouped.setdefault(result.request_name, []).append(result)
        return grouped

    def status(self, result: AllocatedDevice) -> AllocatedDeviceStatus | None:
        """What the claim's `status.devices` says of one of its results (as fetched), None when nothing."""
        key = (self.driver, result.pool, result.device, result.share_id or "")
        with contextlib.suppress(StatusDecodeError):
            raw = (self.raw.get("status") or {}).get("devices")
            return next((e for e in read_device_statuses(raw) if e.key == key), None)
        return None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PreparedDevice:
    """One prepared device of a claim: which allocated device, and the CDI device IDs it gives."""

    #: The allocated device (one of the claim's `results`) this answers for.
    result: AllocatedDevice
    #: The fully qualified CDI device names (vendor/class=name) the container gets for it.
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
            consumed_capacity={str(k): str(v) for k, v in (r.get("consumedCapacity") or {}).items()},
            binding_conditions=tuple(str(c) for c in r.get("bindingConditions") or ()),
            binding_failure_conditions=tuple(str(c) for c in r.get("bindingFailureConditions") or ()),
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
        driver=driver,
    )
