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
from typing import TYPE_CHECKING, Any, ClassVar

from kubedevice.plugin.cdi.spec import CDISpec
from kubedevice.plugin.dra.device_model import CounterSet, DeviceTaint
from kubedevice.plugin.model import Allocation, Device, PluginOptions
from kubedevice.resource.device_status import DeviceCondition, NetworkDeviceData

if TYPE_CHECKING:
    from kubedevice.plugin.dra.hooks import DriverHooks
    from kubedevice.plugin.dra.model import AllocatedDevice, Claim, ClaimRef, PreparedDevice


class DevicePlugin:
    """Base class of a device plugin. Set `resource_name`, implement a device source and `allocate`.

    Subclass it, set `resource_name`, override one device source (`devices()` or `watch_devices()`) and
    `allocate()`; overriding an optional hook (`preferred_allocation`, `pre_start_container`) turns on the
    kubelet option that makes the kubelet call it. Run it with `serve()` (or `PluginServer`). The SDK
    calls every hook on its event loop: a hook that blocks (disk, a vendor library) hands that work to a
    thread (`await asyncio.to_thread(...)`), or every other call and the kubelet's stream wait for it.
    """

    #: The extended resource the devices are advertised as, e.g. "example.com/gpu": a domain-prefixed
    #: name, checked when the server is made (a bad one is a ConfigError). The device plugin face.
    resource_name: str = ""
    #: The DRA driver the devices are published by, e.g. "gpu.example.com" (the DRA face).
    driver_name: str = ""
    #: Serve the DRA health stream (DRAResourceHealth) on the DRA face.
    dra_health: bool = True
    #: DRA: publish an unhealthy device with this taint (e.g. ``DeviceTaint("kubedevice.io/unhealthy",
    #: "NoExecute")``: its pods are evicted, nothing new is allocated on it) instead of leaving it out of
    #: the slices; the taint goes as soon as the device is healthy again. None: unhealthy devices are
    #: not published.
    health_taint: DeviceTaint | None = None
    #: Seconds between two calls of `devices()` (polled source); also the first delay before a failing
    #: device source is tried again.
    poll_interval: float = 5.0
    #: Where the server writes CDI spec files, on both faces: the one `cdi_spec()` returns and, on the DRA
    #: face, one per prepared claim. None: /var/run/cdi, where runtimes read generated specs; but
    #: `<kubelet folder>/cdi` when `serve()` runs the plugin with a kubelet folder other than
    #: /var/lib/kubelet outside cluster mode (a try-out beside `kubedevice node`).
    cdi_spec_dir: str | Path | None = None

    #: The running DRA face (set while it serves): what the run-time methods below call.
    _dra_hooks: DriverHooks | None = None

    #: Hooks whose override turns on the matching DevicePluginOptions flag.
    _OPTIONAL_HOOKS: ClassVar[dict[str, str]] = {
        "preferred_allocation": "get_preferred_allocation_available",
        "pre_start_container": "pre_start_required",
    }

    async def devices(self) -> Sequence[Device]:
        """Polled device source: return the full current device list.

        Called once at start (the server registers only once the first list is known), then every
        `poll_interval` seconds while the plugin runs. Return every device, healthy or not, each ID once;
        the kubelet gets a new ListAndWatch list only when it differs from the previous one. A list with a
        repeated ID or a non-`Device` is logged and ignored. If it raises, the SDK logs the error, reports
        the last known devices unhealthy and calls it again with backoff. Override this or
        `watch_devices()`; when both are overridden, `watch_devices()` is used.
        """
        raise NotImplementedError

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        """Pushed device source: yield the full device list at start and again whenever it changes.

        The SDK iterates it from start until the server stops (the server registers once the first list
        has arrived). Each yielded list replaces the previous one as a whole, as a ListAndWatch message
        does, and reaches the kubelet only when it differs. If the iterator raises or ends, the SDK logs
        why and starts it again after a pause, reporting the last known devices unhealthy while it fails.
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
        """Return what one container gets for `devices` (already checked to be known and healthy).

        Called once per container of each kubelet Allocate request, with that container's devices in the
        kubelet's order, after the SDK checked that each ID is one of the plugin's current devices and is
        healthy (an unknown or unhealthy ID is refused with INVALID_ARGUMENT before this runs). Return an
        `Allocation`: the env, mounts, device nodes, annotations and CDI device names the container gets.
        Raise `InvalidRequest` to refuse (INVALID_ARGUMENT with its message); any other exception fails
        the request with INTERNAL and its message. Either way the kubelet fails the pod's admission.
        """
        raise NotImplementedError

    async def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        """Optional: IDs of `size` devices from `available` the plugin prefers, must_include first.

        Overriding it makes the server advertise `get_preferred_allocation_available`; the kubelet then
        calls GetPreferredAllocation before each Allocate of a container: `available` are the healthy free
        devices it may choose from, `must_include` those it keeps in any case (all among `available`),
        `size` how many the container asks for. Return that many IDs, all from `available`, must_include
        first (an ID outside `available` fails the call with INTERNAL). The kubelet takes the answer as a
        preference: it checks the devices again and picks by itself when the answer does not fit.
        """
        raise NotImplementedError

    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        """Optional: prepare `devices` (reset, warm up...) right before the container using them starts.

        Overriding it makes the server advertise `pre_start_required`; the kubelet then calls
        PreStartContainer with a container's devices of this resource each time that container is about
        to start (after Allocate, before the runtime starts it), within the kubelet's 30 s deadline. IDs
        the plugin does not know are refused first; devices that turned unhealthy since Allocate are
        passed on, the container owns them. Return when the devices are ready; an exception
        (`InvalidRequest` or any other) fails the container's start, which the kubelet tries again.
        """
        raise NotImplementedError

    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        """Optional (DRA face): set up an allocated claim's devices; return one PreparedDevice per device.

        `claim` holds this driver's results only, each mapped back to its `Device.id`. Not overridden,
        the SDK prepares with `allocate()`, once per request of the claim, and writes the claim's CDI spec;
        there a result with a share ID (one share of a device) gets a CDI device of its own, setting
        `KUBEDEVICE_SHARE_<DEVICE>=<shareID>`, so two claims sharing a device never share a CDI device.
        An exception fails this claim only, with `str(exc)` as its error.
        """
        raise NotImplementedError

    async def unprepare(self, claim: ClaimRef) -> None:
        """Optional (DRA face): undo `prepare`; only called for claims the SDK prepared."""

    def shared_counters(self, devices: Sequence[Device]) -> Sequence[CounterSet]:
        """Optional (DRA face): the counter sets the pool offers, which devices consume (`consumes_counters`).

        Called with every device of the DRA face (healthy or not) each time the devices are published;
        the sets go into slices of their own. A device consuming a set (or counter) not returned here is
        refused, and nothing is published until that is fixed (logged). Keep it a pure function of
        `devices`. Default: none.
        """
        return ()

    # ---- the DRA face at run time: called by the driver's own code ----------------------------------

    def set_device_taints(self, device_id: str, taints: Sequence[DeviceTaint]) -> None:
        """DRA face: publish device `device_id` with these taints from now on, beside its own
        (`Device.taints`) and the health taint; they replace those set before, ``[]`` removes them. The
        slices are published again at once. Raises RuntimeError before the DRA face serves."""
        self._hooks("set_device_taints").set_device_taints(device_id, taints)

    async def set_device_status(
        self,
        claim: ClaimRef,
        device: AllocatedDevice,
        *,
        conditions: Sequence[DeviceCondition] | None = None,
        data: Any = None,
        network_data: NetworkDeviceData | None = None,
    ) -> None:
        """DRA face: report an allocated device (one of `claim`'s results, a share of it included) in the
        claim's `status.devices`: its `conditions`, driver `data` (a JSON object) and `network_data`; what
        is None stays as reported before. `kubectl get resourceclaim` and `kubedevice claims` show them.

        Written through the node daemon's status API (standalone) or the API server's status
        subresource (cluster mode). Raises ClaimFetchError when the claim cannot be read and
        ClaimStatusError (`kubedevice.plugin.dra.backend_api`) when the write is refused, with the API
        server's words.
        """
        await self._hooks("set_device_status").set_device_status(
            claim, device, conditions=conditions, data=data, network_data=network_data
        )

    async def set_device_condition(
        self,
        claim: ClaimRef,
        device: AllocatedDevice,
        condition_type: str,
        status: str = "True",
        *,
        reason: str = "",
        message: str = "",
    ) -> None:
        """DRA face: set one condition of an allocated device's status, keeping the others: how an
        attach-on-demand driver marks a device ready (a binding condition `True`; the pod waits for it) or
        failed (a binding failure condition `True`: the claim is allocated again). Errors as
        `set_device_status`."""
        condition = DeviceCondition(condition_type, status, reason=reason, message=message)
        await self._hooks("set_device_condition").set_device_condition(claim, device, condition)

    async def allocated_claims(self) -> list[Claim]:
        """DRA face: the allocated claims with devices of this driver on this node, each cut to this
        driver's results (with the claim as read in `raw`; `Claim.status` says what was reported): what a
        driver that acts before prepare (binding conditions) watches. Polled, not pushed."""
        return await self._hooks("allocated_claims").allocated_claims()

    def attach_dra_hooks(self, hooks: DriverHooks | None) -> None:
        """Called by the SDK when the DRA face starts (and with None when it stops)."""
        self._dra_hooks = hooks

    def _hooks(self, method: str) -> DriverHooks:
        if self._dra_hooks is None:
            raise RuntimeError(f"{method}() needs the plugin's DRA face serving: call it once serve() runs")
        return self._dra_hooks

    def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
        """Optional: the CDI spec defining `devices` (every device, healthy or not; never empty), or None.

        The server calls it with each new device list, from the first on, and writes the spec into
        `cdi_spec_dir` when it differs from the file on disk: the first before registering (a folder it
        cannot write then stops the server with a ConfigError), later ones atomically while serving. The
        file is removed on stop and when no device is left. It runs on the event loop: keep it a pure
        function of `devices`. An exception is logged and the previous spec kept. `allocate` names the
        devices with `spec.qualified_name(...)`. Return None (the default) to write no spec.
        """
        return None

    def options(self) -> PluginOptions:
        """The DevicePluginOptions to advertise; by default derived from the overridden hooks.

        Sent with each Register and answered to the kubelet's GetDevicePluginOptions.
        `preferred_allocation` overridden sets `get_preferred_allocation_available`, `pre_start_container`
        overridden sets `pre_start_required`. Override only to advertise less than the class implements.
        """
        flags = {flag: self._overrides(hook) for hook, flag in self._OPTIONAL_HOOKS.items()}
        return PluginOptions(**flags)

    def describe_source(self) -> str:
        """Which device source this plugin uses: "watch" or "poll"; raises if it has none.

        Called once when the server (or a `SharedPlugin`) is made: NotImplementedError when neither
        `devices()` nor `watch_devices()` is overridden, which the server turns into a ConfigError.
        """
        if self._overrides("watch_devices"):
            return "watch"
        if self._overrides("devices"):
            return "poll"
        raise NotImplementedError(
            f"{type(self).__name__} must override devices() or watch_devices() to report its devices"
        )

    def _overrides(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(DevicePlugin, hook)
