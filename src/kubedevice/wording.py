"""Counts in messages: `1 device`, `2 devices`, never `1 devices` nor `device(s)`."""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """`n` and its noun in the number it takes: `1 device`, `0 devices`, `3 entries` (given `plural`)."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
