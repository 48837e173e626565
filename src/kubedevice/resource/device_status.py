"""A claim's `status.devices` (KEP-4817): what the driver that allocated a device reports of it, its
conditions, driver data and network data, in the `resource.k8s.io/v1` shape; read from JSON with the path of
each field that cannot be read, and written back as the API server writes it.

The entries are a map keyed by (driver, pool, device, shareID), as the API's `listMapKey`s say; reading
checks only the shapes (a string where a string goes). What the API server validates (names, conditions,
limits, allocated devices) is `device_status_rules`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kubedevice.resource.field_errors import path
from kubedevice.resource.times import metav1_time, parse_time
from kubedevice.wording import go_quote

__all__ = [
    "AllocatedDeviceStatus",
    "DeviceCondition",
    "DeviceStatusKey",
    "NetworkDeviceData",
    "StatusDecodeError",
    "device_conditions",
    "device_statuses_json",
    "read_device_statuses",
]

T = TypeVar("T")

#: (driver, pool, device, shareID or ""): the entries' map key, the key of an allocation result too.
DeviceStatusKey = tuple[str, str, str, str]

#: metav1.Time's zero value as it is written: a condition with it has no lastTransitionTime.
ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class DeviceCondition:
    """One metav1.Condition. `last_transition_time` is RFC 3339 in UTC to the second, as metav1.Time
    writes it ("" when the writer gave none)."""

    #: The condition's type, a qualified name (`Ready`, `example.com/Attached`).
    type: str
    #: "True", "False" or "Unknown".
    status: str
    last_transition_time: str = ""
    #: One CamelCase word of why (required by the API server).
    reason: str = ""
    #: What a human reads.
    message: str = ""
    #: The claim's metadata.generation the condition was set for (0: not given).
    observed_generation: int = 0

    def to_json(self) -> dict[str, Any]:
        """The condition as metav1 writes it."""
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.observed_generation:
            out["observedGeneration"] = self.observed_generation
        out["lastTransitionTime"] = self.last_transition_time or None
        out["reason"] = self.reason
        out["message"] = self.message
        return out


@dataclass(frozen=True, slots=True)
class NetworkDeviceData:
    """A network device's data: what a container's network setup needs to know of it."""

    #: The interface's name in the pod (at most 256 bytes).
    interface_name: str = ""
    #: Its addresses in CIDR form (`10.9.8.7/24`), at most 16.
    ips: tuple[str, ...] = ()
    #: Its hardware (MAC) address (at most 128 bytes).
    hardware_address: str = ""

    def to_json(self) -> dict[str, Any]:
        """The data as resource.k8s.io/v1 writes it."""
        out: dict[str, Any] = {}
        if self.interface_name:
            out["interfaceName"] = self.interface_name
        if self.ips:
            out["ips"] = list(self.ips)
        if self.hardware_address:
            out["hardwareAddress"] = self.hardware_address
        return out


@dataclass(frozen=True, slots=True)
class AllocatedDeviceStatus:
    """One `status.devices[]` entry. `data` is the driver's JSON value as given (None when absent; the
    rules refuse one that is not an object)."""

    driver: str
    pool: str
    device: str
    share_id: str | None = None
    conditions: tuple[DeviceCondition, ...] = ()
    data: Any = None
    network_data: NetworkDeviceData | None = None

    @property
    def key(self) -> DeviceStatusKey:
        return (self.driver, self.pool, self.device, self.share_id or "")

    def to_json(self) -> dict[str, Any]:
        """As the API server writes it: `conditions` is null when there are none (Go's nil slice, no
        omitempty), the other optional fields are left out."""
        out: dict[str, Any] = {"driver": self.driver, "pool": self.pool, "device": self.device}
        if self.share_id is not None:
            out["shareID"] = self.share_id
        out["conditions"] = [c.to_json() for c in self.conditions] or None
        if self.data is not None:
            out["data"] = self.data
        if self.network_data is not None:
            out["networkData"] = self.network_data.to_json()
        return out


def device_statuses_json(entries: Iterable[AllocatedDeviceStatus]) -> list[dict[str, Any]]:
    return [e.to_json() for e in entries]


def device_conditions(
    entries: Iterable[AllocatedDeviceStatus], driver: str, pool: str, device: str, share_id: str | None = None
) -> tuple[DeviceCondition, ...]:
    """The conditions a driver reported for one allocated device (one share of it), empty when none:
    what binding conditions are read from."""
    key = (driver, pool, device, share_id or "")
    return next((e.conditions for e in entries if e.key == key), ())


def data_size(data: Any) -> int:
    """The bytes of `data` as JSON without spaces: what the 10 KiB limit counts (the API server counts the
    bytes as sent, spaces included)."""
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())


# --- reading ----------------------------------------------------------------------------------------------


class StatusDecodeError(ValueError):
    """The JSON does not have the API's shape (a number where a string goes, an unknown field); str() lists
    every problem with its field path, in the API server's words for a body it cannot decode."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


_ENTRY_FIELDS = ("driver", "pool", "device", "shareID", "conditions", "data", "networkData")
_CONDITION_FIELDS = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")
_NETWORK_FIELDS = ("interfaceName", "ips", "hardwareAddress")


class _Reader:
    """Typed access that records every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def _type(self, where: str, value: Any, want: str) -> None:
        self.problems.append(f"{where}: cannot decode {_json_type(value)} as {want}")

    def object(self, value: Any, where: str, known: tuple[str, ...]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self._type(where, value, "an object")
            return {}
        for name in value:
            if name not in known:
                self.problems.append(f"unknown field {go_quote(path(where, str(name)))}")
        return value

    def _typed(self, value: Any, where: str, kind: type[T], want: str, empty: T) -> T:
        """`value` when it is a `kind` (a bool is no integer), `empty` for null or after a problem."""
        if value is None:
            return empty
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            self._type(where, value, want)
            return empty
        return value

    def list(self, value: Any, where: str) -> list[Any]:
        return self._typed(value, where, list, "a list", [])

    def string(self, value: Any, where: str) -> str:
        return self._typed(value, where, str, "a string", "")

    def integer(self, value: Any, where: str) -> int:
        return self._typed(value, where, int, "an integer", 0)

    def time(self, value: Any, where: str) -> str:
        """metav1.Time: RFC 3339, written back in UTC to the second; "" for null and for the zero time."""
        if value is None:
            return ""
        if not isinstance(value, str):
            self._type(where, value, "an RFC 3339 time")
            return ""
        parsed = _parse_time(value)
        if parsed is None:
            self.problems.append(
                f'{where}: {go_quote(value)} is not an RFC 3339 time such as "2026-07-24T10:00:00Z"'
            )
            return ""
        return "" if parsed == ZERO_TIME else parsed


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _parse_time(text: str) -> str | None:
    """An RFC 3339 time in UTC to the second (metav1.Time's form), or None."""
    parsed = parse_time(text)
    if parsed is None:
        return None
    try:
        return metav1_time(parsed)
    except OverflowError:  # a time near year 1 with an offset that leaves the calendar in UTC
        return None


def read_device_statuses(value: Any, where: str = "status.devices") -> tuple[AllocatedDeviceStatus, ...]:
    """A `status.devices` JSON list (null is empty). Raises StatusDecodeError naming each bad field."""
    reader = _Reader()
    entries = tuple(_entry(reader, raw, path(where, i)) for i, raw in enumerate(reader.list(value, where)))
    if reader.problems:
        raise StatusDecodeError(reader.problems)
    return entries


def _entry(r: _Reader, raw: Any, where: str) -> AllocatedDeviceStatus:
    fields = r.object(raw, where, _ENTRY_FIELDS)
    share = fields.get("shareID")
    network = fields.get("networkData")
    return AllocatedDeviceStatus(
        driver=r.string(fields.get("driver"), path(where, "driver")),
        pool=r.string(fields.get("pool"), path(where, "pool")),
        device=r.string(fields.get("device"), path(where, "device")),
        share_id=None if share is None else r.string(share, path(where, "shareID")),
        conditions=tuple(
            _condition(r, c, path(where, "conditions", i))
            for i, c in enumerate(r.list(fields.get("conditions"), path(where, "conditions")))
        ),
        data=fields.get("data"),
        network_data=None if network is None else _network(r, network, path(where, "networkData")),
    )


def _condition(r: _Reader, raw: Any, where: str) -> DeviceCondition:
    fields = r.object(raw, where, _CONDITION_FIELDS)
    return DeviceCondition(
        type=r.string(fields.get("type"), path(where, "type")),
        status=r.string(fields.get("status"), path(where, "status")),
        observed_generation=r.integer(fields.get("observedGeneration"), path(where, "observedGeneration")),
        last_transition_time=r.time(fields.get("lastTransitionTime"), path(where, "lastTransitionTime")),
        reason=r.string(fields.get("reason"), path(where, "reason")),
        message=r.string(fields.get("message"), path(where, "message")),
    )


def _network(r: _Reader, raw: Any, where: str) -> NetworkDeviceData:
    fields = r.object(raw, where, _NETWORK_FIELDS)
    ips = r.list(fields.get("ips"), path(where, "ips"))
    return NetworkDeviceData(
        interface_name=r.string(fields.get("interfaceName"), path(where, "interfaceName")),
        ips=tuple(r.string(ip, path(where, "ips", i)) for i, ip in enumerate(ips)),
        hardware_address=r.string(fields.get("hardwareAddress"), path(where, "hardwareAddress")),
    )
