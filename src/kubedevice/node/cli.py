"""`kubedevice node` and `kubedevice demo`: run the node daemon (its clients are in node.client_cli).

Errors are one line on stderr with exit code 2 (bad arguments, an unreachable daemon or socket), never a
traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

import typer

from kubedevice.node.daemon import NodeConfig, NodeDaemon, NodeStartError
from kubedevice.node.durations import parse_duration

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


def _duration(option: str, text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        fail(f"{option}: {err}")


def _positive_duration(option: str, text: str) -> float:
    seconds = _duration(option, text)
    if seconds <= 0:
        fail(f"{option}: duration {text!r} must be more than zero")
    return seconds


ROOT_HELP = "The daemon's state folder [default: $XDG_STATE_HOME/kubedevice or ~/.local/state/kubedevice]."


def node(
    root_dir: Path | None = typer.Option(None, "--root-dir", help=ROOT_HELP),
    pod_manifest_path: Path | None = typer.Option(
        None, "--pod-manifest-path", help="Folder of Pod manifests [default: ROOT/manifests]."
    ),
    stop_grace_period: str = typer.Option(
        "5m", "--stop-grace-period", help="How long a resource whose plugin died stays in capacity."
    ),
    http_addr: str | None = typer.Option(
        None, "--http-addr", help="Also serve the status API on HOST:PORT (a bare PORT binds loopback)."
    ),
    admission_wait: str = typer.Option(
        "0", "--admission-wait", help="How long a new pod may wait for its plugins and healthy devices."
    ),
    allow_symlinks: bool = typer.Option(
        False, "--allow-symlinks", help="Accept manifests that are symlinks to files outside the folder."
    ),
    plugin_timeout: str = typer.Option(
        "30s",
        "--plugin-timeout",
        help="Deadline of each Allocate, GetPreferredAllocation and PreStartContainer.",
    ),
    boot_id: str | None = typer.Option(
        None,
        "--boot-id",
        hidden=True,
        help="Use this boot ID instead of the kernel's (tests simulate a node reboot with it).",
    ),
) -> None:
    """Run the node daemon: device manager, pods from manifests, PodResources and the status API."""
    try:
        tcp = parse_http_addr(http_addr) if http_addr is not None else None
    except ValueError as err:
        fail(str(err))
    config = NodeConfig(
        root_dir=root_dir if root_dir is not None else default_root_dir(),
        pod_manifest_path=pod_manifest_path,
        stop_grace_period=_duration("--stop-grace-period", stop_grace_period),
        http_addr=tcp,
        admission_wait=_duration("--admission-wait", admission_wait),
        allow_symlinks=allow_symlinks,
        plugin_timeout=_positive_duration("--plugin-timeout", plugin_timeout),
        boot_id=boot_id,
    )
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Sockets the daemon and its manager create must not be world-accessible.
    os.umask(0o007)
    try:
        code = asyncio.run(_run_node(config))
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)


async def _run_node(config: NodeConfig) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    daemon = NodeDaemon(config)
    try:
        await daemon.start()
    except (NodeStartError, OSError) as err:
        typer.echo(f"error: {err}", err=True)
        return EXIT_USAGE
    await stop.wait()
    logging.getLogger(__name__).info("stopping")
    await daemon.stop()
    return 0


def demo() -> None:
    """Play the device manager's stories with real processes: admission, a kubelet restart, a plugin death."""
    from kubedevice.node.demo import run_demo

    raise typer.Exit(run_demo())


def register(app: typer.Typer) -> None:
    """Add `node` and `demo` to the `kubedevice` command (the clients are in node.client_cli)."""
    app.command("node")(node)
    app.command("demo")(demo)
