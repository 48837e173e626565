"""What every command shares on the terminal: the rich console for tables, and the one-line failure."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from typer._click.globals import get_current_context

if TYPE_CHECKING:
    from rich.console import Console

#: Exit code of a usage error (a bad flag or argument), as for every command.
EXIT_USAGE = 2

#: Width used when stdout is not a terminal (a pipe, a CI log, `make demo | tee`): rich would assume 80
#: columns and cut resource names such as "example.com/gpu" to "example.com/…".
PIPE_WIDTH = 120


def make_console(**options: Any) -> Console:
    """A Console on stdout, at least PIPE_WIDTH columns wide when stdout is not a terminal."""
    # Imported here: commands that print no table (the node daemon, plugins) start without rich.
    from rich.console import Console

    if not sys.stdout.isatty() and "width" not in options:
        options["width"] = PIPE_WIDTH
    return Console(**options)


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
