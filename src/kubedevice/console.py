"""What every command shares on the terminal: the rich console for tables, and the one-line failure."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from typer._click.globals import get_current_context

from kubedevice.logs import escaped

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

#: Exit code of a usage error (a bad flag or argument), as for every command.
EXIT_USAGE = 2

#: Width used when stdout is not a terminal (a pipe, a CI log, `make demo | tee`) and `COLUMNS` is not set:
#: rich would assume 80 columns and cut resource names such as "example.com/gpu" to "example.com/…".
PIPE_WIDTH = 120


def columns_asked() -> int | None:
    """`COLUMNS` when it is a positive whole number: the width the user asked for, terminal or not."""
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def make_console(**options: Any) -> Console:
    """A Console on stdout; when stdout is not a terminal, `COLUMNS` wide, else PIPE_WIDTH. (On a terminal
    rich takes `COLUMNS` itself, else the terminal's width.)"""
    # Imported here: commands that print no table (the node daemon, plugins) start without rich.
    from rich.console import Console

    if not sys.stdout.isatty() and "width" not in options:
        options["width"] = columns_asked() or PIPE_WIDTH
    return Console(**options)


def shown(text: object) -> str:
    """A value from the daemon, a plugin or a file name as a table or a line of a command shows it:
    control characters escaped as the logs write them (kubedevice.logs.escaped), so that a manifest's or a
    device's name can neither colour the terminal nor break a table's lines, and rich markup escaped, so
    that `[bold]` in a name is shown as it is."""
    from rich.markup import escape

    return escape(escaped(str(text)))


def print_whole(console: Console, table: Table) -> None:
    """Print a table; where the output is not a terminal (a pipe, a file, a log), no word of a cell is
    broken over two lines, so that a script finds a UID, a CDI ID or a path whole.

    A table wider than the console is narrowed as rich narrows it, the widest columns first, but none below
    its longest word or its header, so text wraps at spaces; when even those do not fit, the table is as
    wide as they need. (rich would fold the words.)
    """
    from rich.measure import Measurement

    unbounded = console.options.update_width(sys.maxsize)
    if console.is_terminal or Measurement.get(console, unbounded, table).maximum <= console.width:
        console.print(table)
        return
    spans = []
    for column in table.columns:
        header = Measurement.get(console, unbounded, column.header).maximum
        cells = [Measurement.get(console, unbounded, cell) for cell in column.cells]
        widest = max([header, *(size.maximum for size in cells)])
        # A column that must not wrap keeps its width; any other may come down to its longest word (its
        # header stays on one line).
        narrowest = max([header, *(size.minimum for size in cells)])
        spans.append((widest if column.no_wrap else narrowest, widest))
    for column, (_, widest) in zip(table.columns, spans, strict=True):
        column.width = widest
    frame = Measurement.get(console, unbounded, table).maximum - sum(widest for _, widest in spans)
    widths = _narrowed(spans, console.width - frame)
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width
    saved = console.width
    console.width = max(saved, sum(widths) + frame)
    try:
        console.print(table)
    finally:
        console.width = saved


def _narrowed(spans: list[tuple[int, int]], room: int) -> list[int]:
    """Widths from (narrowest, widest) spans that add up to `room`, or to the narrowest ones when they
    need more: as rich narrows a table, the widest columns first, down to a common width, but none below
    its narrowest."""

    def total(level: int) -> int:
        return sum(max(narrowest, min(widest, level)) for narrowest, widest in spans)

    # The highest common width the columns above it can come down to (binary search: total() only grows).
    low, high = 0, max(widest for _, widest in spans)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if total(middle) <= room else (low, middle - 1)
    widths = [max(narrowest, min(widest, low)) for narrowest, widest in spans]
    # What is left of the room, a column each, to the last of those cut to the common width (rich's
    # rounding takes more from the first ones).
    capped = [i for i, (narrowest, widest) in enumerate(spans) if narrowest <= low < widest]
    for i in capped[len(capped) - max(0, room - sum(widths)) :]:
        widths[i] += 1
    return widths


def command_name(command_path: str | None = None) -> str:
    """`node`, `podresources get`...: the command as typed after `kubedevice` (or `kubedevice` itself)."""
    if command_path is None:
        ctx = get_current_context(silent=True)
        command_path = ctx.command_path if ctx is not None else "kubedevice"
    _, _, rest = command_path.partition(" ")
    return rest or command_path


def fail(message: str, code: int = EXIT_USAGE, *, command: str | None = None) -> NoReturn:
    """The one way a command fails: `error: <command>: <what> — <what to do>` on stderr, then exit.

    A message without its own "what to do" gets, for a usage error, a pointer to the command's help.
    """
    name = command or command_name()
    text = message if message.startswith(f"{name}: ") else f"{name}: {message}"
    if " — " not in text and code == EXIT_USAGE:
        text += f" — see 'kubedevice {name} --help'" if name != "kubedevice" else " — see 'kubedevice --help'"
    typer.echo(f"error: {text}", err=True)
    raise typer.Exit(code)


LOG_LEVELS = ("debug", "info", "warning", "error")


def parse_log_level(text: str) -> int:
    """`--log-level` of every long-running command: debug, info, warning or error."""
    if text.lower() not in LOG_LEVELS:
        fail(f"--log-level must be one of {', '.join(LOG_LEVELS)}; got {text!r}")
    return int(getattr(logging, text.upper()))
