"""metav1.Time as the API reads and writes it: an RFC 3339 time in (`2025-01-02T15:04:05Z`, fractions and
offsets allowed), UTC to the second out. One place for the taints' `timeAdded`, a condition's
`lastTransitionTime`, an allocation's `allocationTimestamp` and the times the daemon shows."""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["RFC3339", "metav1_time", "parse_time"]

RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time as an aware datetime, or None when `text` is not one."""
    if RFC3339.fullmatch(text) is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def metav1_time(moment: datetime) -> str:
    """metav1.Time's text: UTC, to the second (an aware `moment`; a naive one is taken as local time)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
