"""The taints a DRA device is published with, and since when.

A device's taints are its own (`Device.taints`), those the driver's code set (`set_device_taints`) and,
while it is unhealthy, the driver's `health_taint`: recomputed from the current state at every
publication, so a taint whose cause is gone (the device healthy again, the set taints cleared, a driver
restarted with a healthy device) is never published again. A taint without its own `time_added` is
stamped with the time it first appeared and keeps it while it stays, as upstream's resourceslice
controller keeps a published taint's time (copyTaintTimeAdded); a taint that went and comes back is new.
At start the times of the taints published before (by this driver's previous run) are offered, so a
restart does not restart a NoExecute taint's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from kubedevice.plugin.dra.device_model import DeviceTaint

#: (device name, key, value, effect): one taint of one device, whatever its time.
TaintKey = tuple[str, str, str, str]


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class TaintBook:
    """Which taints each device is published with; `stamp` is called at each publication."""

    def __init__(self, health_taint: DeviceTaint | None, now: Callable[[], datetime] = _now) -> None:
        self.health_taint = health_taint
        self._now = now
        #: Device ID -> the taints driver code set (`DevicePlugin.set_device_taints`).
        self._set: dict[str, tuple[DeviceTaint, ...]] = {}
        #: The time of each taint published now, and of the taints published before a restart (used once).
        self._since: dict[TaintKey, datetime] = {}
        self._earlier: dict[TaintKey, datetime] = {}

    def set(self, device_id: str, taints: Sequence[DeviceTaint]) -> None:
        wrong = [t for t in taints if not isinstance(t, DeviceTaint)]
        if wrong:
            raise TypeError(
                f"set_device_taints({device_id!r}): expected DeviceTaint objects, got {wrong[0]!r}"
            )
        if taints:
            self._set[device_id] = tuple(taints)
        else:
            self._set.pop(device_id, None)

    def remember(self, times: Mapping[TaintKey, datetime]) -> None:
        """The times of the taints published before: a taint published again keeps its time."""
        self._earlier.update(times)

    def wanted(self, device_id: str, own: Sequence[DeviceTaint], healthy: bool) -> tuple[DeviceTaint, ...]:
        """The device's taints now, each once (the first of the same key, value and effect wins)."""
        unhealthy = (self.health_taint,) if self.health_taint is not None and not healthy else ()
        taints: dict[tuple[str, str, str], DeviceTaint] = {}
        for taint in (*own, *self._set.get(device_id, ()), *unhealthy):
            taints.setdefault(taint.identity, taint)
        return tuple(taints.values())

    def stamp(
        self, devices: Sequence[tuple[str, str, tuple[DeviceTaint, ...]]]
    ) -> dict[str, tuple[DeviceTaint, ...]]:
        """(device ID, device name, taints) of the devices published now -> their taints, each with its
        time. Times of taints no longer published are forgotten, and so are those of a previous run."""
        since: dict[TaintKey, datetime] = {}
        out: dict[str, tuple[DeviceTaint, ...]] = {}
        for device_id, name, taints in devices:
            stamped = []
            for taint in taints:
                if taint.time_added is None:
                    key = (name, *taint.identity)
                    time = self._since.get(key) or self._earlier.get(key) or self._now()
                    since[key] = time
                    taint = replace(taint, time_added=time)
                stamped.append(taint)
            out[device_id] = tuple(stamped)
        self._since, self._earlier = since, {}
        return out
