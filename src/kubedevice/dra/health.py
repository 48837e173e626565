"""Device health from DRA drivers (KEP-4680): the kubelet's health stream and its `healthInfoCache`.

Per endpoint that advertises a health service, NodeWatchResources is followed. Each message is the driver's
complete list: each device in it is stamped with our clock (the plugin's `last_updated_time` is not used
for staleness) and keeps its health until its timeout passes without a new report; then it reads Unknown.
When a stream ends, all health of that driver is dropped and the stream is opened again after a pause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from kubedevice.api.constants import DRA_HEALTH_RETRY_S, DRA_HEALTH_TIMEOUT_S, DRA_HEALTH_V1_SERVICE
from kubedevice.api.drahealth.v1 import api_pb2 as health_v1
from kubedevice.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from kubedevice.api.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from kubedevice.api.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from kubedevice.dra.client import go_rpc_error
from kubedevice.tasks import cancel_and_wait

log = logging.getLogger(__name__)

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
UNKNOWN = "Unknown"
#: The wire's enum (UNKNOWN = 0, HEALTHY = 1, UNHEALTHY = 2) as the kubelet's strings.
_HEALTH_NAMES = {0: UNKNOWN, 1: HEALTHY, 2: UNHEALTHY}

#: A longer message is cut to its first MAX_MESSAGE - 3 characters and "...".
MAX_MESSAGE = 1024


@dataclass(frozen=True, slots=True)
class DeviceHealthInfo:
    """One device's health as read now: "Healthy", "Unhealthy" or "Unknown", its message and when it was
    last reported (our monotonic clock)."""

    health: str
    message: str
    last_seen: float


@dataclass(frozen=True, slots=True)
class _Reported:
    health: str
    message: str
    last_seen: float
    timeout: float


def _message(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


#: Told the driver and the (pool, device) keys whose health an update changed.
HealthChangeListener = Callable[[str, list[tuple[str, str]]], None]


class HealthCache:
    """driver -> (pool, device) -> the last report; staleness is applied when read. `on_change` hears of
    every update that changed some device (the kubelet then notifies the pods using them)."""

    def __init__(
        self,
        *,
        default_timeout: float = DRA_HEALTH_TIMEOUT_S,
        clock: Callable[[], float],
        on_change: HealthChangeListener | None = None,
    ) -> None:
        self._default_timeout = default_timeout
        self._clock = clock
        self._on_change = on_change
        self._drivers: dict[str, dict[tuple[str, str], _Reported]] = {}

    def update(self, driver: str, devices: Any) -> list[tuple[str, str]]:
        """Apply one NodeWatchResourcesResponse's device list (v1 or v1alpha1 DeviceHealth messages).

        Returns the (pool, device) keys whose health changed, as the kubelet's `updateHealthInfo` finds
        them: a device reported for the first time or with another health, message or timeout, and a
        device missing from this list whose last report has timed out (it now reads Unknown).
        """
        now = self._clock()
        known = self._drivers.setdefault(driver, {})
        changed: list[tuple[str, str]] = []
        reported: set[tuple[str, str]] = set()
        for d in devices:
            seconds = d.health_check_timeout_seconds
            if seconds < 0:
                log.warning(
                    "DRA driver %s reports a negative health check timeout (%d s) for device %s/%s: "
                    "using %g s",
                    driver,
                    seconds,
                    d.device.pool_name,
                    d.device.device_name,
                    self._default_timeout,
                )
            timeout = float(seconds) if seconds > 0 else self._default_timeout
            key = (d.device.pool_name, d.device.device_name)
            new = _Reported(_HEALTH_NAMES.get(d.health, UNKNOWN), _message(d.message), now, timeout)
            old = known.get(key)
            if old is None or (old.health, old.message, old.timeout) != (new.health, new.message, timeout):
                changed.append(key)
            known[key] = new
            reported.add(key)
        for key, old in list(known.items()):
            if key not in reported and old.health != UNKNOWN and now - old.last_seen > old.timeout:
                # Recorded Unknown, so that the next list does not count it again.
                known[key] = _Reported(UNKNOWN, "", old.last_seen, old.timeout)
                changed.append(key)
        if changed and self._on_change is not None:
            try:
                self._on_change(driver, changed)
            except Exception:
                log.exception("DRA health change listener failed")
        return changed

    def clear(self, driver: str) -> None:
        self._drivers.pop(driver, None)

    def device_health(self, driver: str) -> dict[tuple[str, str], DeviceHealthInfo]:
        now = self._clock()
        return {key: _read(r, now) for key, r in self._drivers.get(driver, {}).items()}

    def get(self, driver: str, pool: str, device: str) -> DeviceHealthInfo:
        """One device's health now (the kubelet's `getHealthInfo`): Unknown when never reported."""
        reported = self._drivers.get(driver, {}).get((pool, device))
        return _read(reported, self._clock()) if reported is not None else NOT_REPORTED


#: What a device no health stream has reported reads as.
NOT_REPORTED = DeviceHealthInfo(UNKNOWN, "", 0.0)


def _read(r: _Reported, now: float) -> DeviceHealthInfo:
    """A report as read at `now`: Unknown, without its message, once its timeout has passed."""
    if now - r.last_seen > r.timeout:
        return DeviceHealthInfo(UNKNOWN, "", r.last_seen)
    return DeviceHealthInfo(r.health, r.message, r.last_seen)


class HealthStream:
    """Follows NodeWatchResources of one endpoint into `cache`, reopening it `retry` s after it ends."""

    def __init__(
        self,
        driver: str,
        endpoint: str,
        channel: grpc.aio.Channel,
        service: str,
        cache: HealthCache,
        *,
        retry: float = DRA_HEALTH_RETRY_S,
    ) -> None:
        self._driver = driver
        self._endpoint = endpoint
        self._cache = cache
        self._retry = retry
        if service == DRA_HEALTH_V1_SERVICE:
            self._stub: Any = health_v1_grpc.DRAResourceHealthStub(channel)
            self._request: Any = health_v1.NodeWatchResourcesRequest()
        else:
            self._stub = health_v1alpha1_grpc.DRAResourceHealthStub(channel)
            self._request = health_v1alpha1.NodeWatchResourcesRequest()
        self._task = asyncio.create_task(self._run(), name=f"DRA health {driver} {endpoint}")

    async def _run(self) -> None:
        while True:
            await self._follow_once()
            await asyncio.sleep(self._retry)

    async def _follow_once(self) -> None:
        call = self._stub.NodeWatchResources(self._request)
        received = False
        reason = "stream ended"
        try:
            async for message in call:
                received = True
                self._cache.update(self._driver, message.devices)
        except grpc.aio.AioRpcError as err:
            reason = go_rpc_error(err)
        finally:
            call.cancel()
            if received:
                # The kubelet drops what the driver said once its stream is gone, ended or cancelled
                # (a stream that never opened has said nothing).
                self._cache.clear(self._driver)
                log.info(
                    "DRA driver %s health stream at %s ended (%s): its device health is dropped",
                    self._driver,
                    self._endpoint,
                    reason,
                )
        if not received:
            log.debug("DRA driver %s health stream at %s: %s", self._driver, self._endpoint, reason)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
