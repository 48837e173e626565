"""`DevicePlugin`: the one class a plugin author subclasses.

An author states the resource name, where the devices come from, and what a container gets for
them. Everything else (sockets, registration, re-registration after a kubelet restart, streaming,
validation of the kubelet's requests) is the server's job.

Devices come from one of two sources; override exactly one:

* `devices()`: a coroutine returning the full current list; the SDK polls it every
  `poll_interval` seconds and streams only real changes;
* `watch_devices()`: an async iterator yielding the full list whenever it changes, for hardware
  that can push events (netlink, vendor libraries with callbacks, a health socket).

The DevicePluginOptions sent to the kubelet follow from which optional hooks are overridden, so an
author never declares a capability separately from implementing it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from kubedevice.plugin.cdi.files import DEFAULT_SPEC_DIR
from kubedevice.plugin.cdi.spec import CDISpec
from kubedevice.plugin.model import Allocation, Device, PluginOptions

if TYPE_CHECKING:
    from kubedevice.plugin.dra.model import Claim, ClaimRef, PreparedDevice


class DevicePlugin:
    """Base class of a device plugin. Set `resource_name`, implement a device source and `allocate`."""

    #: The extended resource the devices are advertised as, e.g. "example.com/gpu" (device plugin face).
    resource_name: str = ""
    #: The DRA driver the devices are published by, e.g. "gpu.example.com" (DRA face).
    driver_name: str = ""
    #: Serve the DRA health stream (DRAResourceHealth) on the DRA face.
    dra_health: bool = True
    #: Seconds between two calls of `devices()` when the plugin uses the polled source.
    poll_interval: float = 5.0
    #: Where the server keeps the spec `cdi_spec()` returns (runtimes read /etc/cdi and /var/run/cdi).
    cdi_spec_dir: str | Path = DEFAULT_SPEC_DIR

    #: Hooks whose override turns on the matching DevicePluginOptions flag.
    _OPTIONAL_HOOKS: ClassVar[dict[str, str]] = {
        "preferred_allocation": "get_preferred_allocation_available",
        "pre_start_container": "pre_start_required",
    }

    async def devices(self) -> Sequence[Device]:
        """Return the full current device list (polled source)."""
        raise NotImplementedError

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        """Yield the full device list at start and again whenever it changes (pushed source).

        The default turns the polled `devices()` into this shape, yielding only when the list differs
        from the previous one.
        """
        if not self._overrides("devices"):
            raise NotImplementedError(
                f"{type(self).__name__} must override devices() or watch_devices() to report its devices"
            )
        previous: tuple[Device, ...] | None = None
        while True:
            current = tuple(await self.devices())
            if current != previous:
                previous = current
                yield current
            await asyncio.sleep(self.poll_interval)

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        """Return what one container gets for `devices` (already checked to be known and healthy)."""
        raise NotImplementedError

    async def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        """Optional: IDs of `size` devices from `available` the plugin prefers, must_include first."""
        raise NotImplementedError

    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        """Optional: prepare `devices` (reset, warm up...) right before the container using them starts."""
        raise NotImplementedError

    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        """Optional (DRA face): set up an allocated claim's devices; return one PreparedDevice per device.

        `claim` holds this driver's results only, each mapped back to its `Device.id`. Not overridden,
        the SDK prepares with `allocate()`, once per request of the claim, and writes the claim's CDI spec.
        An exception fails this claim only, with `str(exc)` as its error.
        """
        raise NotImplementedError

    async def unprepare(self, claim: ClaimRef) -> None:
        """Optional (DRA face): undo `prepare`; only called for claims the SDK prepared."""

    def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
        """Optional: the CDI spec defining `devices` (every device, healthy or not; never empty), or None.

        The server writes it into `cdi_spec_dir` before registering, again whenever the device list changes
        the spec, and removes it on stop. `allocate` names the devices with `spec.qualified_name(...)`.
        """
        return None

    def options(self) -> PluginOptions:
        """The DevicePluginOptions to advertise; by default derived from the overridden hooks."""
        flags = {flag: self._overrides(hook) for hook, flag in self._OPTIONAL_HOOKS.items()}
        return PluginOptions(**flags)

    def describe_source(self) -> str:
        """Which device source this plugin uses: "watch" or "poll"; raises if it has none."""
        if self._overrides("watch_devices"):
            return "watch"
        if self._overrides("devices"):
            return "poll"
        raise NotImplementedError(
            f"{type(self).__name__} must override devices() or watch_devices() to report its devices"
        )

    def _overrides(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(DevicePlugin, hook)
