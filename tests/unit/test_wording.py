"""Counts in messages take the number of their noun: `1 device`, `2 devices`, never `1 devices` or `(s)`."""

from __future__ import annotations

from kubedevice.wording import counted


def test_counted_chooses_singular_or_plural() -> None:
    assert [counted(n, "device") for n in (0, 1, 2)] == ["0 devices", "1 device", "2 devices"]
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == "3 entries"
