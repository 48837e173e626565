"""The endpoint lifecycle: a plugin connects, its ListAndWatch is followed, its stream ends, it comes back.

The kubelet's registration callback (`connectClient`), `runEndpoint`, `genericDeviceUpdateCallback` and
`PluginDisconnected` / `markResourceUnhealthy`, over the manager's state. The stop grace period itself is
counted by :mod:`kubedevice.manager.capacity`, from the stop time set here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kubedevice.manager.devices import ResourceDevices, Snapshot
from kubedevice.manager.endpoint import Endpoint
from kubedevice.manager.errors import PluginCallError, RegistrationError
from kubedevice.manager.state import ManagerState
from kubedevice.manager.types import Change

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DialTimeouts:
    dial: float
    options: float


class EndpointLifecycle:
    """Connects plugins, follows their streams and turns stream ends into unhealthy devices."""

    def __init__(
        self,
        state: ManagerState,
        timeouts: DialTimeouts,
        *,
        status: Callable[[], str],
        checkpoint_soon: Callable[[], None],
    ) -> None:
        self._state = state
        self._timeouts = timeouts
        self._status = status
        self._checkpoint_soon = checkpoint_soon
        self._streams: dict[Endpoint, asyncio.Task[None]] = {}

    async def connect_client(self, resource: str, socket_path: str) -> None:
        """Dial a plugin, record it as the primary endpoint of `resource`, start its ListAndWatch."""
        if self._status() not in ("starting", "running"):
            raise RegistrationError("device manager is not running")
        try:
            endpoint = await Endpoint.connect(
                resource,
                socket_path,
                dial_timeout=self._timeouts.dial,
                options_timeout=self._timeouts.options,
            )
        except PluginCallError as err:
            raise RegistrationError(str(err)) from None
        if self._status() != "running":
            await endpoint.close()
            raise RegistrationError("device manager is stopping")
        state = self._state
        siblings = state.endpoint_store.setdefault(resource, {})
        # A plugin that registers again on the same socket is a new instance (it restarted); the old
        # connection is dropped without touching health, so its late stream end cannot evict this one.
        replaced = siblings.pop(socket_path, None)
        siblings[socket_path] = endpoint
        state.endpoints[resource] = endpoint
        task = asyncio.create_task(self._follow(endpoint), name=f"ListAndWatch {resource} {socket_path}")
        self._streams[endpoint] = task
        log.info("registered device plugin for %s at %s", resource, socket_path)
        state.changes.publish(Change("registered", resource))
        if replaced is not None:
            await replaced.close()

    async def disconnect_client(self, resource: str, socket_path: str) -> None:
        endpoint = self._state.endpoint_store.get(resource, {}).get(socket_path)
        if endpoint is not None:
            await self.endpoint_ended(endpoint, "plugin deregistered")

    async def stop(self) -> None:
        """End every live endpoint (the manager is stopping) and wait for their streams."""
        for resource in list(self._state.endpoint_store):
            for endpoint in list(self._state.endpoint_store.get(resource, {}).values()):
                await self.endpoint_ended(endpoint, "device manager stopped")
        await asyncio.gather(*list(self._streams.values()), return_exceptions=True)

    async def _follow(self, endpoint: Endpoint) -> None:
        try:
            try:
                reason = await endpoint.list_and_watch(self._on_snapshot)
            except Exception as err:
                # A bug in handling one message must not leave a half-dead endpoint behind.
                log.exception("handling ListAndWatch of %s failed", endpoint.resource_name)
                reason = f"internal error: {err}"
            # A stream ended by our own shutdown is expected; one the plugin ended is worth a warning.
            stopping = self._status() in ("stopping", "stopped")
            log.log(
                logging.INFO if stopping else logging.WARNING,
                "ListAndWatch ended %s for device plugin %s at %s: %s",
                "at shutdown" if stopping else "unexpectedly",
                endpoint.resource_name,
                endpoint.socket_path,
                reason,
            )
            await self.endpoint_ended(endpoint, reason)
        finally:
            self._streams.pop(endpoint, None)

    async def endpoint_ended(self, endpoint: Endpoint, reason: str) -> None:
        """The kubelet's PluginDisconnected: only the endpoint still tracked for its socket path counts."""
        state = self._state
        resource = endpoint.resource_name
        siblings = state.endpoint_store.get(resource)
        if siblings is None or siblings.get(endpoint.socket_path) is not endpoint:
            await endpoint.close()
            return
        del siblings[endpoint.socket_path]
        endpoint.set_stop_time(state.clock())
        if siblings:
            # The most recently connected survivor becomes primary; health is untouched.
            state.endpoints[resource] = list(siblings.values())[-1]
        else:
            del state.endpoint_store[resource]
            state.endpoints[resource] = endpoint
            devices = state.devices.get(resource)
            if devices is not None:
                devices.mark_unhealthy()  # markResourceUnhealthy
                state.devices_changed()
            log.info("device plugin for %s disconnected (%s): its devices are unhealthy", resource, reason)
        await endpoint.close()
        state.changes.publish(Change("disconnected", resource))

    async def _on_snapshot(self, endpoint: Endpoint, msg: Snapshot) -> None:
        """The kubelet's genericDeviceUpdateCallback: one full ListAndWatch list of a resource."""
        state = self._state
        resource = endpoint.resource_name
        if state.endpoint_store.get(resource, {}).get(endpoint.socket_path) is not endpoint:
            return  # a replaced connection's last words
        devices = state.devices.get(resource)
        if devices is None:
            devices = state.devices[resource] = ResourceDevices()
        before = self._health_of_allocated(resource, devices)
        try:
            report = devices.apply(msg)
        finally:
            state.devices_changed()  # even a message that failed to decode may have changed some
        if log.isEnabledFor(logging.DEBUG):
            healthy, unhealthy = len(devices.healthy), len(devices.unhealthy)
            log.debug("ListAndWatch update of %s: %d healthy, %d unhealthy", resource, healthy, unhealthy)
        warning = report.warning(resource)
        if warning is not None:
            log.warning("%s", warning)
            state.warnings[resource] = warning
        else:
            state.warnings.pop(resource, None)
        after = self._health_of_allocated(resource, devices)
        changed_pods = {pod for pod, health in after.items() if before.get(pod) != health}
        state.changes.publish(Change("devices", resource, tuple(sorted(changed_pods))))
        # Not awaited: the stream goes on while the write runs, and a burst of snapshots folds into
        # one or two writes of the latest state (a failure is only logged, as in the kubelet).
        self._checkpoint_soon()

    def _health_of_allocated(
        self, resource: str, devices: ResourceDevices
    ) -> dict[str, frozenset[tuple[str, str]]]:
        """pod UID -> (device, health) of its devices of `resource`; O(allocated), not O(devices)."""
        out: dict[str, frozenset[tuple[str, str]]] = {}
        if not self._state.allocated.get(resource):
            return out
        for pod_uid, _container, res, entry in self._state.pod_devices.entries():
            if res != resource:
                continue
            pairs = {(d, devices.device_health(d) or "") for d in entry.device_ids()}
            out[pod_uid] = out.get(pod_uid, frozenset()) | pairs
        return out
