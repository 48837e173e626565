"""The DRA plugin store (the kubelet's `DRAPluginManager`, D3): the registered endpoints of each driver.

Each driver has its endpoints in registration order; calls go to the newest connected one, else the newest.
A second registration of the same endpoint is refused; a deregistration removes only its own endpoint.
When a driver has no connected endpoint (none registered, or none connected), `on_wipe(driver)` is called
`wipe_delay` seconds later unless an endpoint of the driver connects first: the kubelet's wipe of the
driver's ResourceSlices. Health streams of the endpoints that serve one fill the store's health cache.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubedevice.api.constants import (
    DRA_CALL_TIMEOUT_S,
    DRA_HEALTH_RETRY_S,
    DRA_HEALTH_TIMEOUT_S,
    DRA_WIPE_DELAY_S,
)
from kubedevice.dra.client import DRAPluginClient
from kubedevice.dra.errors import DRARegistrationError, DriverLookupError
from kubedevice.dra.health import DeviceHealthInfo, HealthCache, HealthChangeListener, HealthStream
from kubedevice.dra.metrics import DRAMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EndpointStatus:
    endpoint: str
    service: str
    health_service: str | None
    connected: bool


@dataclass(frozen=True, slots=True)
class DriverStatus:
    """A driver as the store sees it: its endpoints in registration order and whether a wipe is pending."""

    name: str
    endpoints: tuple[EndpointStatus, ...]
    wipe_pending: bool


@dataclass(slots=True)
class _Endpoint:
    client: DRAPluginClient
    health: HealthStream | None


class DRAPlugins:
    """driver -> its registered endpoints; the plugin watcher's handler (:mod:`.registration`) adds and
    removes them."""

    def __init__(
        self,
        *,
        metrics: DRAMetrics,
        call_timeout: float = DRA_CALL_TIMEOUT_S,
        wipe_delay: float = DRA_WIPE_DELAY_S,
        on_wipe: Callable[[str], None] | None = None,
        on_registered: Callable[[str], None] | None = None,
        health_timeout: float = DRA_HEALTH_TIMEOUT_S,
        health_retry: float = DRA_HEALTH_RETRY_S,
        on_health_change: HealthChangeListener | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.call_timeout = call_timeout
        self.wipe_delay = wipe_delay
        self._on_wipe = on_wipe
        self._on_registered = on_registered
        self._health_retry = health_retry
        self._health = HealthCache(default_timeout=health_timeout, clock=clock, on_change=on_health_change)
        self._store: dict[str, list[_Endpoint]] = {}
        self._wipes: dict[str, asyncio.TimerHandle] = {}
        #: Drivers that had a connected endpoint since this store started or their slices were last wiped:
        #: the next connection makes them usable *again*, their slices kept.
        self._were_usable: set[str] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._stopped = False

    # --- registration (called by the handler) ---

    def add(self, driver: str, endpoint: str, service: str, health_service: str | None) -> None:
        """Register one endpoint of `driver`; raises DRARegistrationError for an endpoint already there."""
        if self._stopped:
            raise DRARegistrationError("DRA manager is stopped")
        entries = self._store.get(driver, [])
        if any(e.client.endpoint == endpoint for e in entries):
            # One plugin instance cannot take over the endpoint of another.
            raise DRARegistrationError(
                f"endpoint {endpoint} already registered for DRA driver plugin {driver}"
            )
        client = DRAPluginClient(
            driver,
            endpoint,
            service,
            metrics=self.metrics,
            call_timeout=self.call_timeout,
            health_service=health_service,
            on_connection_change=self._connection_changed,
        )
        health = None
        if health_service is not None:
            health = HealthStream(
                driver, endpoint, client.channel, health_service, self._health, retry=self._health_retry
            )
        self._store.setdefault(driver, []).append(_Endpoint(client, health))
        log.info(
            "registered DRA driver %s plugin at %s (service %s, health %s, %d endpoint(s))",
            driver,
            endpoint,
            service,
            health_service or "none",
            len(self._store[driver]),
        )
        self._sync(driver)
        if self._on_registered is not None:
            try:
                self._on_registered(driver)
            except Exception:
                log.exception("on_registered(%s) failed", driver)

    async def remove(self, driver: str, endpoint: str) -> None:
        """Deregister that endpoint of `driver` only (the other endpoints of the driver stay)."""
        entries = self._store.get(driver, [])
        entry = next((e for e in entries if e.client.endpoint == endpoint), None)
        if entry is None:
            return
        entries.remove(entry)
        if not entries:
            del self._store[driver]
        log.info(
            "deregistered DRA driver %s plugin at %s (%d endpoint(s) left)", driver, endpoint, len(entries)
        )
        self._sync(driver)
        # Closed in a task of its own: a cancelled deregistration (the watcher stopping) still closes it.
        closing = asyncio.create_task(self._close(entry), name=f"close DRA {driver} {endpoint}")
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)
        await asyncio.shield(closing)

    # --- lookups ---

    def get(self, driver: str) -> DRAPluginClient:
        """The newest connected endpoint of `driver`, else its newest (the kubelet's GetPlugin)."""
        if not driver:
            raise DriverLookupError("DRA driver name is empty")
        entries = self._store.get(driver)
        if not entries:
            raise DriverLookupError(f"DRA driver {driver} is not registered")
        for entry in reversed(entries):
            if entry.client.connected:
                return entry.client
        return entries[-1].client

    def drivers(self) -> list[DriverStatus]:
        """Every driver with an endpoint or a pending wipe, by name."""
        out = []
        for name in sorted(set(self._store) | set(self._wipes)):
            endpoints = tuple(
                EndpointStatus(
                    e.client.endpoint, e.client.service, e.client.health_service, e.client.connected
                )
                for e in self._store.get(name, [])
            )
            out.append(DriverStatus(name, endpoints, name in self._wipes))
        return out

    def device_health(self, driver: str) -> dict[tuple[str, str], DeviceHealthInfo]:
        """(pool, device) -> health of every device `driver` reported, Unknown once its report is stale."""
        return self._health.device_health(driver)

    def health_of(self, driver: str, pool: str, device: str) -> DeviceHealthInfo:
        """One device's health now; Unknown when its driver never reported it or the report is stale."""
        return self._health.get(driver, pool, device)

    async def stop(self) -> None:
        """Close every endpoint and cancel every pending wipe. Idempotent."""
        self._stopped = True
        for handle in self._wipes.values():
            handle.cancel()
        self._wipes.clear()
        entries = [e for es in self._store.values() for e in es]
        self._store.clear()
        for entry in entries:
            await self._close(entry)
        await asyncio.gather(*self._closing, return_exceptions=True)

    # --- connection state and wiping ---

    def _connection_changed(self, client: DRAPluginClient) -> None:
        if not self._stopped and any(e.client is client for e in self._store.get(client.driver, [])):
            self._sync(client.driver)

    def _sync(self, driver: str) -> None:
        """After a change of `driver`'s endpoints: cancel its wipe if usable, else make one pending."""
        if self._stopped:
            return
        if any(e.client.connected for e in self._store.get(driver, [])):
            handle = self._wipes.pop(driver, None)
            if handle is not None:
                handle.cancel()
                if driver in self._were_usable:
                    log.info("DRA driver %s is usable again: its ResourceSlices are kept", driver)
                else:
                    log.info("DRA driver %s is usable", driver)
            self._were_usable.add(driver)
            return
        if driver in self._wipes:
            return  # already pending: the first deadline stands
        loop = asyncio.get_running_loop()
        self._wipes[driver] = loop.call_later(self.wipe_delay, self._wipe, driver)

    def _wipe(self, driver: str) -> None:
        self._wipes.pop(driver, None)
        self._were_usable.discard(driver)
        log.info(
            "DRA driver %s has had no connected plugin for %g s: wiping its ResourceSlices",
            driver,
            self.wipe_delay,
        )
        if self._on_wipe is not None:
            try:
                self._on_wipe(driver)
            except Exception:
                log.exception("wiping the ResourceSlices of DRA driver %s failed", driver)

    @staticmethod
    async def _close(entry: _Endpoint) -> None:
        if entry.health is not None:
            await entry.health.stop()
        await entry.client.close()
