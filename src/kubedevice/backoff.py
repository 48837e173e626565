"""Delays between the attempts of something that fails, growing exponentially up to a cap."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts (the SDK's Register, the DRA cluster backend's publishing and watching):
    `initial` seconds, times `factor` after each failure, up to `cap`. A success starts over: a fresh
    `delays()`.
    """

    initial: float = 0.1
    cap: float = 5.0
    factor: float = 2.0

    def delays(self) -> Iterator[float]:
        """initial, initial*factor, ... up to cap, then cap forever."""
        delay = self.initial
        while True:
            yield min(delay, self.cap)
            delay *= self.factor
