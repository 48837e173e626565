"""What every command around the node shares: its state folder, listen addresses, one-line failures.

Kept apart from the daemon's command so that tools (`status`, `top`, `exporter`) load no device manager.
"""

from __future__ import annotations

import os
from pathlib import Path

from kubedevice.console import EXIT_USAGE, fail

__all__ = [
    "EXIT_USAGE",
    "ROOT_HELP",
    "check_folder",
    "default_root_dir",
    "fail",
    "folder_option",
    "parse_http_addr",
    "root_option",
]


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


ROOT_HELP = (
    f"The daemon's state folder [default: {default_root_dir()}, from $XDG_STATE_HOME or ~/.local/state]."
)


def folder_option(flag: str, text: str | None) -> Path | None:
    """A folder option's path, None when not given; an empty one fails (it would mean the current folder)."""
    if text is None:
        return None
    if not text.strip():
        fail(f"{flag} is empty — give a folder, or leave the option out for its default")
    return Path(text)


def root_option(text: str | None) -> Path:
    """`--root-dir` of every command: the default state folder when not given; "" fails (it means ".")."""
    return folder_option("--root-dir", text) or default_root_dir()


def check_folder(flag: str, path: Path) -> None:
    """Fail in one line, naming `flag`, when `path` cannot be a folder: it, or a parent, is a file."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "" if existing == path else f": {existing} is a file"
        what = "is a file, not a folder" if existing == path else "cannot be a folder"
        fail(f"{flag} {path} {what}{where} — give a folder (missing ones are created)")
    if not os.access(existing, os.W_OK | os.X_OK) and existing != path:
        fail(f"{flag} {path} cannot be created: {existing} is not writable — give a folder you can write")
