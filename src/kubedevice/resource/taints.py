"""Device taints and the tolerations of requests (`resource.k8s.io/v1` DeviceTaint, DeviceToleration,
DeviceTaintSelector), and upstream's rule for whether a toleration tolerates a taint
(`resourceclaim.ToleratesTaint`). taint_reader.py reads and checks them from documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "BLOCKING_EFFECTS",
    "TAINT_EFFECTS",
    "TOLERATION_OPERATORS",
    "DeviceTaint",
    "DeviceTaintSelector",
    "DeviceToleration",
    "tolerates",
]

#: The effects the API accepts (newest first: `None` is informational only).
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
#: The effects that keep a device from a request that does not tolerate them; any other (`None`, or one a
#: newer API adds) is ignored by the allocator, as upstream's `taintPreventsAllocation` does.
BLOCKING_EFFECTS = frozenset(("NoSchedule", "NoExecute"))
TOLERATION_OPERATORS = ("Equal", "Exists")


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """A taint on a device, from its slice or from a DeviceTaintRule."""

    key: str
    effect: str
    value: str = ""
    #: `timeAdded` as published (RFC 3339), or None: the API server sets it, the daemon keeps what it read.
    time_added: str | None = None

    @property
    def blocks(self) -> bool:
        """Whether the allocator keeps the device from a request that does not tolerate this taint."""
        return self.effect in BLOCKING_EFFECTS

    def text(self) -> str:
        """`key=value:Effect`, as kubectl shows a taint (`key:Effect` without a value)."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key}
        if self.value:
            out["value"] = self.value
        out["effect"] = self.effect
        if self.time_added is not None:
            out["timeAdded"] = self.time_added
        return out


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """A request's toleration; `operator` as defaulted by the API server (an empty one is `Equal`)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    #: Empty: every effect.
    effect: str = ""
    toleration_seconds: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The v1 shape, as the API server returns it (empty fields left out, the operator always set)."""
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """upstream's ToleratesTaint: an empty effect matches every effect, an empty key every key; `Exists`
    matches any value, `Equal` (or an empty operator) the same value; an unknown operator nothing."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


@dataclass(frozen=True, slots=True)
class DeviceTaintSelector:
    """Which devices a DeviceTaintRule taints: each field set must match (None: any)."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def matches(self, driver: str, pool: str, device: str) -> bool:
        return (
            (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
            and (self.device is None or self.device == device)
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in (("driver", self.driver), ("pool", self.pool), ("device", self.device)):
            if value is not None:
                out[key] = value
        return out
