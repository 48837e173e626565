import logging

import pytest

from kubedevice.ratelimit import RateLimitedLog, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_refill_at_qps() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=100, burst=10, clock=clock)
    assert [bucket.allow() for _ in range(11)] == [True] * 10 + [False]
    clock.now += 0.05  # 5 tokens at 100 per second
    assert [bucket.allow() for _ in range(6)] == [True] * 5 + [False]
    clock.now += 10  # refills only up to the burst
    assert sum(bucket.allow() for _ in range(20)) == 10


def test_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError, match="qps > 0"):
        TokenBucket(qps=0)
    with pytest.raises(ValueError, match="burst >= 1"):
        TokenBucket(burst=0)


def test_a_rate_limited_log_counts_the_lines_it_dropped_in_the_next(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    said = RateLimitedLog(logging.getLogger("test.ratelimit"), TokenBucket(qps=1, burst=2, clock=clock))
    with caplog.at_level(logging.WARNING, logger="test.ratelimit"):
        for i in range(5):
            said.log(logging.WARNING, "refused %d", i)
        clock.now += 1
        said.log(logging.WARNING, "refused %d", 5)
        said.log(logging.WARNING, "refused %d", 6)
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused 1",
        "refused 5 (3 more like it not logged)",
    ]
