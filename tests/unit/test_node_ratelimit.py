import pytest

from kubedevice.ratelimit import TokenBucket


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
