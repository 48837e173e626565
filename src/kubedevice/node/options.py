"""What every command around the node shares: its state folder, listen addresses, one-line failures.

Kept apart from the daemon's command so that tools (`status`, `top`, `exporter`) load no device manager.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import typer

EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def default_root_dir() -> Path:
    """A per-user state folder; never the real kubelet's /var/lib/kubelet."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state else Path.home() / ".local" / "state"
    return base / "kubedevice"


def parse_http_addr(text: str, option: str = "--http-addr") -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or just `PORT` (then loopback); errors name `option`."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{option} {text!r}: expected HOST:PORT or PORT with a port from 0 to 65535")
    return host, int(port_text)


ROOT_HELP = "The daemon's state folder [default: $XDG_STATE_HOME/kubedevice or ~/.local/state/kubedevice]."
