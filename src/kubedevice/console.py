"""The rich console every command prints its tables to."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

#: Width used when stdout is not a terminal (a pipe, a CI log, `make demo | tee`): rich would assume 80
#: columns and cut resource names such as "example.com/gpu" to "example.com/…".
PIPE_WIDTH = 120


def make_console(**options: Any) -> Console:
    """A Console on stdout, at least PIPE_WIDTH columns wide when stdout is not a terminal."""
    if not sys.stdout.isatty() and "width" not in options:
        options["width"] = PIPE_WIDTH
    return Console(**options)
