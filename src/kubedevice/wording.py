"""Words shared by every message: counts (`1 device`, `2 devices`, never `1 devices` nor `device(s)`), an
unexpected failure as one line, and Go's quoting where a text repeats the kubelet's or the API server's."""

from __future__ import annotations

from collections.abc import Sequence


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """`n` and its noun in the number it takes: `1 device`, `0 devices`, `3 entries` (given `plural`)."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def listed(items: list[str], limit: int = 5) -> str:
    """The first `limit` items joined by commas, then how many more: `a, b and 3 more`."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def failure_line(err: BaseException) -> str:
    """An unexpected failure (a bug, not a bad input) as one line: its type and the start of its message,
    for a file's error, a pod's message or a log line that must not carry a whole traceback."""
    text = " ".join(str(err).split())
    if not text:
        return type(err).__name__
    return f"{type(err).__name__}: {text[:200]}{'…' if len(text) > 200 else ''}"


def go_quote(text: str) -> str:
    """Go's `%q` of one string (strconv.Quote)."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append(
                {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}[
                    ch
                ]
            )
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_quote_list(items: Sequence[str]) -> str:
    """Go's `%q` of a string slice: `["a" "b"]`."""
    return "[" + " ".join(go_quote(i) for i in items) + "]"
