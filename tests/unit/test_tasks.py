"""cancel_and_wait: every task ends, one that swallows a cancellation included; failures are logged."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kubedevice.tasks import cancel_and_wait


async def test_stops_tasks_even_one_that_swallows_a_cancellation(caplog: pytest.LogCaptureFixture) -> None:
    swallowed = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.set()  # swallows the first cancellation, as 3.11's wait_for could
        await asyncio.Event().wait()

    async def failed() -> None:
        raise RuntimeError("boom")

    a = asyncio.create_task(stubborn(), name="stubborn")
    b = asyncio.create_task(failed(), name="failed")
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="kubedevice.tasks"):
        await cancel_and_wait(a, None, b)
    assert swallowed.is_set() and a.cancelled() and b.done()
    assert "failed ended with RuntimeError('boom')" in caplog.text


async def test_the_callers_own_cancellation_goes_on() -> None:
    started = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            started.set()
            await asyncio.Event().wait()  # never ends by itself

    inner = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    outer = asyncio.create_task(cancel_and_wait(inner))
    await started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    inner.cancel()
    await asyncio.gather(inner, return_exceptions=True)
