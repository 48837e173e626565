"""The `kubelet` fixture: a stand-in kubelet in the test's event loop, on a temporary device plugin folder.

It is the conformance checker's stand-in (Registration on kubelet.sock, each RegisterRequest judged in the
kubelet's order, restarts that delete every socket) with the device manager's endpoint behind each accepted
registration: the ListAndWatch stream is followed like the kubelet follows it, the latest list wins, and
Allocate, GetPreferredAllocation and PreStartContainer go out with the kubelet's deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kubedevice.api.constants import DIAL_TIMEOUT_S, PRE_START_CONTAINER_TIMEOUT_S
from kubedevice.conformance.kubelet import FakeKubelet, RegistrationAttempt
from kubedevice.manager.devices import Snapshot
from kubedevice.manager.endpoint import Endpoint
from kubedevice.manager.errors import PluginCallError
from kubedevice.plugin import Allocation, Device, DevicePlugin, PluginOptions, PluginServer
from kubedevice.plugin.wire import allocation_from_wire, device_from_wire
from kubedevice.testing.serving import ServedPlugin, serve_plugin

T = TypeVar("T")
#: How often wait_for looks again when nothing the kubelet sees has changed (the predicate may read more).
RECHECK_S = 0.05


class PluginCallFailed(AssertionError):
    """A plugin call the stand-in kubelet made failed; `str()` is one line naming the call and the error."""


@dataclass
class Registration:
    """One Register call, as the stand-in kubelet judged it, and what it then read from the plugin."""

    resource_name: str
    endpoint: str
    version: str
    accepted: bool
    #: Why the kubelet refused it (the text the plugin got back); empty when accepted.
    refusal: str
    #: What GetDevicePluginOptions answered; None when refused before asking.
    options: PluginOptions | None
    #: 0 for the kubelet's first start, one more after each restart().
    generation: int
    #: The latest ListAndWatch list; None until the first arrives.
    devices: tuple[Device, ...] | None = None
    lists_received: int = 0
    #: Why the ListAndWatch stream ended (None while it is open).
    stream_ended: str | None = None
    _endpoint: Endpoint | None = field(default=None, repr=False)


class StandInKubelet:
    """kubelet.sock in `plugin_dir`: records every registration and keeps each accepted plugin's stream.

    Every wait fails with one-line AssertionError after `timeout` seconds (per call or the default).
    """

    def __init__(self, plugin_dir: Path, *, timeout: float = 10.0) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.timeout = timeout
        self.registrations: list[Registration] = []
        self.generation = 0
        self._registry = _Registry(self.plugin_dir, min(DIAL_TIMEOUT_S, timeout), self._on_attempt)
        self._followers: set[asyncio.Task[None]] = set()
        self._plugins: list[ServedPlugin[PluginServer]] = []
        self._changed = asyncio.Event()

    @property
    def socket_path(self) -> Path:
        return self._registry.socket_path

    async def start(self) -> None:
        await self._registry.start()

    async def close(self) -> None:
        """Stop every plugin served through serve_plugin, then the kubelet itself."""
        for plugin in reversed(self._plugins):
            await plugin.stop()
        await self._drop_endpoints()
        await self._registry.stop()

    async def restart(self) -> None:
        """Restart as the kubelet does: kubelet.sock goes, every socket in the folder is deleted, it returns.

        Plugins then have to register again; calls and device lists use the new registrations.
        """
        await self._drop_endpoints()
        await self._registry.stop()
        await self._registry.clean_plugin_dir()
        self.generation += 1
        await self._registry.start()
        self._notify()

    async def serve_plugin(self, plugin: DevicePlugin, **server_options: object) -> PluginServer:
        """Run `plugin` with the SDK's server in this event loop against this kubelet, until the test ends."""
        __tracebackhide__ = True
        served = await serve_plugin(plugin, self.plugin_dir, **server_options)
        self._plugins.append(served)
        return served.server

    # -- what the kubelet saw ------------------------------------------------------------------------------

    def latest(self, resource: str | None = None) -> list[Device] | None:
        """The current registration's latest device list (no waiting); None before the first list."""
        registration = self._current(self._resource_or_none(resource))
        if registration is None or registration.devices is None:
            return None
        return list(registration.devices)

    def health(self, resource: str | None = None) -> dict[str, bool]:
        """Device ID -> healthy, from the latest list (empty before the first one)."""
        return {device.id: device.healthy for device in self.latest(resource) or ()}

    async def wait_registered(
        self, resource: str | None = None, timeout: float | None = None
    ) -> Registration:
        """The accepted registration of `resource` since the last (re)start; waits for it."""
        __tracebackhide__ = True
        limit = self.timeout if timeout is None else timeout

        def accepted() -> Registration | None:
            return self._current(self._resource_or_none(resource))

        return await self._wait(accepted, limit, lambda: self._no_registration(resource, limit))

    async def devices(self, resource: str | None = None, timeout: float | None = None) -> list[Device]:
        """The latest device list of `resource`; waits for its registration and first ListAndWatch list."""
        __tracebackhide__ = True
        limit = self.timeout if timeout is None else timeout
        registration = await self.wait_registered(resource, limit)

        def listed() -> Registration | None:
            current = self._current(registration.resource_name)
            return current if current is not None and current.lists_received else None

        def failure() -> str:
            ended = registration.stream_ended
            why = f": the stream ended ({ended})" if ended else ""
            return f"{registration.resource_name} sent no ListAndWatch list within {limit:g} s{why}"

        current = await self._wait(listed, limit, failure)
        return list(current.devices or ())

    async def wait_for(
        self, predicate: Callable[[], T], timeout: float | None = None, what: str | None = None
    ) -> T:
        """Wait until `predicate()` is true and return its value; it is tried again on every change seen."""
        __tracebackhide__ = True
        limit = self.timeout if timeout is None else timeout
        label = what or getattr(predicate, "__name__", "the condition")
        if label == "<lambda>":
            label = "the condition"
        return await self._wait(
            predicate, limit, lambda: f"{label} not met within {limit:g} s; {self.summary()}"
        )

    def summary(self) -> str:
        """One line: what is registered and its devices, for failure messages."""
        names = list(dict.fromkeys(r.resource_name for r in self._live() if r.accepted))
        if not names:
            refused = [r for r in self.registrations if not r.accepted]
            if refused:
                return f"last registration refused: {refused[-1].refusal}"
            return "no plugin registered"
        parts = []
        for name in names:
            devices = self.latest(name)
            if devices is None:
                shown = "no list yet"
            else:
                shown = ", ".join(f"{d.id} {'healthy' if d.healthy else 'unhealthy'}" for d in devices)
            parts.append(f"{name}: {shown or 'empty list'}")
        return "; ".join(parts)

    # -- the calls the kubelet makes --------------------------------------------------------------------

    async def allocate(self, *device_ids: str, resource: str | None = None) -> Allocation:
        """Allocate `device_ids` for one container, as the kubelet does at admission: its run options."""
        __tracebackhide__ = True
        endpoint = await self._endpoint(resource)
        call = f"Allocate({', '.join(device_ids)}) on {endpoint.resource_name}"
        try:
            response = await endpoint.allocate(list(device_ids), self.timeout)
        except PluginCallError as err:
            raise PluginCallFailed(f"{call} failed: {err}") from None
        if len(response.container_responses) != 1:
            raise PluginCallFailed(
                f"{call}: expected 1 container response, got {len(response.container_responses)}"
            )
        try:
            return allocation_from_wire(response.container_responses[0])
        except ValueError as err:
            raise PluginCallFailed(f"{call} answered run options the kubelet cannot use: {err}") from None

    async def preferred(
        self,
        available: Sequence[str],
        must_include: Sequence[str] = (),
        size: int = 1,
        resource: str | None = None,
    ) -> list[str]:
        """GetPreferredAllocation for one container: the device IDs the plugin prefers."""
        __tracebackhide__ = True
        endpoint = await self._endpoint(resource)
        call = f"GetPreferredAllocation(size {size} of {', '.join(available)}) on {endpoint.resource_name}"
        try:
            response = await endpoint.get_preferred_allocation(
                list(available), list(must_include), size, self.timeout
            )
        except PluginCallError as err:
            raise PluginCallFailed(f"{call} failed: {err}") from None
        if len(response.container_responses) != 1:
            raise PluginCallFailed(
                f"{call}: expected 1 container response, got {len(response.container_responses)}"
            )
        return list(response.container_responses[0].deviceIDs)

    async def pre_start(self, *device_ids: str, resource: str | None = None) -> None:
        """PreStartContainer for `device_ids`, with the kubelet's deadline."""
        __tracebackhide__ = True
        endpoint = await self._endpoint(resource)
        call = f"PreStartContainer({', '.join(device_ids)}) on {endpoint.resource_name}"
        try:
            await endpoint.pre_start_container(list(device_ids), PRE_START_CONTAINER_TIMEOUT_S)
        except PluginCallError as err:
            raise PluginCallFailed(f"{call} failed: {err}") from None

    # -- inside ---------------------------------------------------------------------------------------

    def _on_attempt(self, attempt: RegistrationAttempt) -> None:
        request = attempt.request
        options = attempt.options
        registration = Registration(
            resource_name=request.resource_name,
            endpoint=request.endpoint,
            version=request.version,
            accepted=attempt.accepted,
            refusal=attempt.message,
            options=None
            if options is None
            else PluginOptions(options.pre_start_required, options.get_preferred_allocation_available),
            generation=self.generation,
        )
        self.registrations.append(registration)
        if attempt.accepted and attempt.channel is not None and attempt.socket_path is not None:
            registration._endpoint = Endpoint(
                request.resource_name, attempt.socket_path, channel=attempt.channel, options=options
            )
            follower = asyncio.get_running_loop().create_task(self._follow(registration))
            self._followers.add(follower)
            follower.add_done_callback(self._followers.discard)
        self._notify()

    async def _follow(self, registration: Registration) -> None:
        endpoint = registration._endpoint
        assert endpoint is not None  # set before the follower starts

        async def on_snapshot(_: Endpoint, snapshot: Snapshot) -> None:
            registration.devices = tuple(device_from_wire(d) for d in snapshot.devices)
            registration.lists_received += 1
            self._notify()

        try:
            registration.stream_ended = await endpoint.list_and_watch(on_snapshot)
        except ValueError as err:
            registration.stream_ended = f"the plugin sent a device the kubelet cannot use: {err}"
        self._notify()

    async def _drop_endpoints(self) -> None:
        for registration in self.registrations:
            if registration._endpoint is not None:
                await registration._endpoint.close()
        for follower in list(self._followers):
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait(self, condition: Callable[[], T | None], timeout: float, failure: Callable[[], str]) -> T:
        __tracebackhide__ = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = condition()
            if value:
                return value
            crashed = self._crashed_plugin()
            if crashed is not None:
                raise AssertionError(f"{failure()}; {crashed}")
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(failure())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, RECHECK_S))

    def _crashed_plugin(self) -> str | None:
        for plugin in self._plugins:
            problem = plugin.failure()
            if problem is not None:
                return problem
        return None

    def _live(self) -> list[Registration]:
        return [r for r in self.registrations if r.generation == self.generation]

    def _current(self, resource: str | None) -> Registration | None:
        """The newest accepted registration of `resource` (any when None) since the last (re)start."""
        for registration in reversed(self._live()):
            if registration.accepted and resource in (None, registration.resource_name):
                return registration
        return None

    def _resource_or_none(self, resource: str | None) -> str | None:
        if resource is not None:
            return resource
        names = sorted({r.resource_name for r in self._live() if r.accepted})
        if len(names) > 1:
            raise AssertionError(f"several resources are registered ({', '.join(names)}): pass resource=")
        return names[0] if names else None

    def _no_registration(self, resource: str | None, timeout: float) -> str:
        refused = [r for r in self._live() if not r.accepted and resource in (None, r.resource_name)]
        if refused:
            last = refused[-1]
            return f"the registration of {last.resource_name!r} was refused: {last.refusal}"
        who = "the plugin" if resource is None else resource
        return f"{who} did not register within {timeout:g} s (kubelet.sock is {self.socket_path})"

    async def _endpoint(self, resource: str | None) -> Endpoint:
        __tracebackhide__ = True
        registration = await self.wait_registered(resource)
        assert registration._endpoint is not None  # accepted registrations have one
        return registration._endpoint


class _Registry(FakeKubelet):
    """The conformance checker's Registration service, reporting each judged attempt as it happens."""

    def __init__(
        self, plugin_dir: Path, dial_timeout_s: float, on_attempt: Callable[[RegistrationAttempt], None]
    ) -> None:
        super().__init__(plugin_dir, dial_timeout_s)
        self._on_attempt = on_attempt

    def record(self, attempt: RegistrationAttempt) -> None:
        self._on_attempt(attempt)
