"""The plugin's current device list: fed by the author's source, watched by every ListAndWatch stream."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.model import Device

log = logging.getLogger(__name__)

#: The longest wait between two tries of a device source that keeps failing, in seconds.
MAX_BACKOFF_S = 30.0


class Inventory:
    """Versioned snapshots of the device list; each change wakes every waiting stream.

    Snapshots are whole lists, like ListAndWatch messages: a stream never sees a half-applied change.
    """

    def __init__(self, on_change: Callable[[tuple[Device, ...]], None] | None = None) -> None:
        self._devices: tuple[Device, ...] = ()
        self._by_id: dict[str, Device] = {}
        self._version = 0
        self._next = asyncio.Event()
        self._on_change = on_change
        #: Set once the source has answered (or failed) for the first time, so the first
        #: ListAndWatch message is the real list rather than an empty placeholder.
        self.ready = asyncio.Event()

    @property
    def devices(self) -> tuple[Device, ...]:
        return self._devices

    @property
    def version(self) -> int:
        return self._version

    def get(self, device_id: str) -> Device | None:
        return self._by_id.get(device_id)

    def update(self, devices: Iterable[Device]) -> bool:
        """Replace the list; return whether it changed. A bad list raises ValueError and changes nothing."""
        snapshot = tuple(devices)
        by_id: dict[str, Device] = {}
        for device in snapshot:
            if not isinstance(device, Device):
                raise ValueError(f"device source yielded {type(device).__name__}, expected Device")
            if device.id in by_id:
                raise ValueError(f"device source yielded device ID {device.id!r} twice")
            by_id[device.id] = device
        self.ready.set()
        if snapshot == self._devices:
            return False
        self._devices, self._by_id = snapshot, by_id
        self._version += 1
        woken, self._next = self._next, asyncio.Event()
        woken.set()
        if self._on_change is not None:
            self._on_change(snapshot)
        return True

    async def wait_newer(self, version: int) -> tuple[int, tuple[Device, ...]]:
        """Wait until the list is newer than `version`; return the new version and list."""
        while self._version <= version:
            await self._next.wait()
        return self._version, self._devices

    async def follow(
        self, plugin: DevicePlugin, retry_interval: float, max_backoff: float = MAX_BACKOFF_S
    ) -> None:
        """Feed the inventory from the plugin's device source until cancelled.

        A source that fails, or whose `watch_devices()` ends, is restarted after `retry_interval`, doubling
        up to `max_backoff` while it keeps failing or ending: a source that yields one list and returns
        is a mistake to report, not a loop to spin. The wait goes back to `retry_interval` once a run has
        lasted `max_backoff`. An error is logged once per different error and an ending once, then only
        as a count (after 10, 100, 1000... times), never once per retry. While it fails, the last known
        devices are reported unhealthy: the plugin cannot vouch for them, and the kubelet must not hand
        them out. An ended source's last list stands.
        """
        loop = asyncio.get_running_loop()
        cap = max(max_backoff, retry_interval)
        failures = ended = 0
        last_error = ""
        delay = 0.0
        while True:
            started = loop.time()
            try:
                async for devices in plugin.watch_devices():
                    if failures:
                        log.warning(
                            "device source of %s works again after %d failure(s)",
                            plugin.resource_name,
                            failures,
                        )
                        failures, last_error = 0, ""
                    self._apply(devices)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                error = _describe(exc)
                _log_failure(plugin.resource_name, error, failures, error != last_error, cap)
                last_error = error
                self._mark_unhealthy()
            else:
                # A run as long as the longest wait was a working source: an ending after it is news.
                ended = 1 if loop.time() - started >= cap else ended + 1
                if _is_power_of_ten(ended):
                    log.warning(
                        "device source of %s ended (%d time(s): its watch_devices() returned); restarting "
                        "it with backoff up to %gs",
                        plugin.resource_name,
                        ended,
                        cap,
                    )
            self.ready.set()
            fresh = delay == 0 or loop.time() - started >= cap
            delay = retry_interval if fresh else min(delay * 2, cap)
            await asyncio.sleep(delay)

    def _mark_unhealthy(self) -> None:
        if any(d.healthy for d in self._devices):
            self.update(dataclasses.replace(d, healthy=False) for d in self._devices)

    def _apply(self, devices: Sequence[Device]) -> None:
        try:
            self.update(devices)
        except ValueError as exc:
            log.error("ignoring device list: %s", exc)
            self.ready.set()


def _log_failure(resource: str, error: str, failures: int, new: bool, cap: float) -> None:
    if new:
        log.error(
            "device source of %s failed: %s (retrying with backoff up to %gs; its devices are unhealthy "
            "meanwhile)",
            resource,
            error,
            cap,
        )
    elif _is_power_of_ten(failures):
        log.error("device source of %s still failing (%d times): %s", resource, failures, error)


def _is_power_of_ten(n: int) -> bool:
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
