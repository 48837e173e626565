"""Backoff: the delays both of its users take (the SDK's Register, the DRA cluster backend)."""

from __future__ import annotations

from itertools import islice

from kubedevice.backoff import Backoff


def test_delays_grow_by_the_factor_up_to_the_cap() -> None:
    assert list(islice(Backoff(initial=0.5, cap=60.0).delays(), 9)) == [0.5, 1, 2, 4, 8, 16, 32, 60, 60]
    assert list(islice(Backoff(initial=1.0, cap=10.0, factor=3.0).delays(), 4)) == [1, 3, 9, 10]


def test_a_fresh_iterator_starts_over() -> None:
    backoff = Backoff(initial=0.1, cap=5.0)
    delays = backoff.delays()
    assert [next(delays), next(delays)] == [0.1, 0.2]
    delays = backoff.delays()  # a success
    assert next(delays) == 0.1
