"""The exporter's refresh loop: read PodResources and the checkpoint every interval, publish one snapshot.

Scrapes never reach the kubelet: they read the last published snapshot, so any number of Prometheus
servers cost the kubelet's PodResources budget nothing, and a scrape during a refresh sees the previous
refresh whole, never half of the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field, replace

from kubedevice.exporter.checkpoint_probe import (
    CheckpointAllocation,
    CheckpointProbe,
    CheckpointReport,
    stale_allocations,
)
from kubedevice.exporter.memory import MemoryReleaser
from kubedevice.inventory import ErrorKind, PodResourcesError, PodResourcesReader, PodResourcesView
from kubedevice.ratelimit import DEFAULT_QPS

log = logging.getLogger(__name__)

#: The shortest --interval: two calls per refresh at this period use a tenth of the kubelet's 100 QPS,
#: leaving the rest of its budget to the other PodResources clients of the node.
MIN_INTERVAL_S = 10 * PodResourcesReader.CALLS_PER_READ / DEFAULT_QPS
#: After RESOURCE_EXHAUSTED the period doubles, up to this many intervals, until a read succeeds.
MAX_BACKOFF_FACTOR = 16


@dataclass(frozen=True, slots=True)
class ScrapeSnapshot:
    """Everything one scrape shows, published whole."""

    #: The last successful PodResources read (kept through failures); None before the first.
    view: PodResourcesView | None = None
    checkpoint: CheckpointReport | None = None
    #: Checkpoint allocations of pods PodResources no longer lists; None when either side is unknown.
    stale: tuple[CheckpointAllocation, ...] | None = None
    errors: dict[ErrorKind, int] = field(default_factory=lambda: dict.fromkeys(ErrorKind, 0))
    #: Whether the last PodResources read succeeded.
    up: bool = False
    last_success: float | None = None
    last_duration: float | None = None
    refreshes: int = 0


class Refresher:
    """Owns the snapshot; `snapshot` is replaced (never changed) by each refresh."""

    def __init__(
        self, reader: PodResourcesReader, probe: CheckpointProbe, interval: float = MIN_INTERVAL_S
    ) -> None:
        self._reader = reader
        self._probe = probe
        self.interval = max(interval, MIN_INTERVAL_S)
        self.snapshot = ScrapeSnapshot()
        self._backoff = 1
        self._last_error: str | None = None
        self.refreshed = asyncio.Event()
        self._memory = MemoryReleaser()
        #: Held by the checkpoint decoding and by each scrape: their transient peaks (tens of MiB with
        #: 10,000 containers) come one after the other, never on top of each other.
        self.heavy = threading.Lock()

    async def refresh(self) -> ScrapeSnapshot:
        started = time.perf_counter()
        old = self.snapshot
        errors = old.errors
        view, up = old.view, False
        try:
            view = await self._reader.read()
            up = True
            self._backoff = 1
            self._log_recovery()
        except PodResourcesError as err:
            errors = {**errors, err.kind: errors[err.kind] + 1}
            if err.kind is ErrorKind.RATE_LIMITED:
                self._backoff = min(self._backoff * 2, MAX_BACKOFF_FACTOR)
            self._log_error(str(err))
        checkpoint, stale = await asyncio.to_thread(self._checkpoint, view)
        self.snapshot = replace(
            old,
            view=view,
            checkpoint=checkpoint,
            stale=stale,
            errors=errors,
            up=up,
            last_success=time.time() if up else old.last_success,
            last_duration=time.perf_counter() - started,
            refreshes=old.refreshes + 1,
        )
        self.refreshed.set()
        return self.snapshot

    def _checkpoint(
        self, view: PodResourcesView | None
    ) -> tuple[CheckpointReport, tuple[CheckpointAllocation, ...] | None]:
        # The gRPC answers were just dropped, and a changed checkpoint's decoding is dropped next: hand
        # their pages back before and after, so that the two peaks do not stack up (in this thread, off
        # the loop).
        with self.heavy:
            self._memory.release()
            report = self._probe.read()
            self._memory.release()
        if view is None or report.entries is None or report.message is not None:
            return report, None
        return report, stale_allocations(report, view.held_ids())

    @property
    def period(self) -> float:
        """The wait before the next refresh: the interval, stretched while the kubelet rate-limits us."""
        return self.interval * self._backoff

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.refresh()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.period)

    def _log_error(self, message: str) -> None:
        # Once per change, not once per interval: a kubelet away for an hour is one line, not 720.
        if message != self._last_error:
            log.warning("%s; serving the last good data", message)
            self._last_error = message

    def _log_recovery(self) -> None:
        if self._last_error is not None:
            log.warning("PodResources at %s answers again", self._reader.socket)
            self._last_error = None
