"""A token bucket, the PodResources server's unary rate limit (100 QPS, burst 10), and log lines kept
within one."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

DEFAULT_QPS = 100.0
DEFAULT_BURST = 10


class TokenBucket:
    """`allow()` takes a token if one is left; tokens come back at `qps` per second, up to `burst`."""

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def allow(self) -> bool:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class RateLimitedLog:
    """Log lines of one kind (a caller may repeat them in a loop) within a token bucket; lines past it are
    dropped and counted in the next line logged, so the log stays bounded and still says how many."""

    def __init__(self, logger: logging.Logger, bucket: TokenBucket) -> None:
        self._logger = logger
        self._bucket = bucket
        self._dropped = 0

    def log(self, level: int, message: str, *args: object) -> None:
        if not self._bucket.allow():
            self._dropped += 1
            return
        dropped, self._dropped = self._dropped, 0
        if dropped:
            message += f" ({dropped} more like it not logged)"
        self._logger.log(level, message, *args)
