"""Durations written the kubelet's way (Go's time.ParseDuration): `500ms`, `3s`, `5m`, `1m30s`, `0`."""

from __future__ import annotations

import re

_UNITS_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # micro sign
    "μs": 1e-6,  # greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError naming the text when it is not a non-negative Go duration."""
    raw = text.strip()
    if raw == "0":
        return 0.0
    if not raw:
        raise ValueError("empty duration; use a number with a unit, e.g. 500ms, 3s, 5m or 1m30s")
    if raw[0] == "-":
        raise ValueError(f"duration {text!r} is negative")
    body = raw[1:] if raw[0] == "+" else raw
    total = 0.0
    pos = 0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            raise ValueError(
                f"invalid duration {text!r}: expected numbers with units ns, us, ms, s, m or h (e.g. 1m30s)"
            )
        total += float(match.group(1)) * _UNITS_S[match.group(2)]
        pos = match.end()
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    return total


def format_duration(seconds: float) -> str:
    """The short Go-style text of a duration, for logs and tables (`1m30s`, `250ms`)."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, secs = divmod(seconds, 60)
    if minutes < 1:
        return f"{secs:g}s"
    hours, minutes = divmod(int(minutes), 60)
    head = f"{hours}h" if hours else ""
    return f"{head}{minutes}m{secs:g}s" if secs else f"{head}{minutes}m"
