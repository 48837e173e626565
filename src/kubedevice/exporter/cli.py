"""`kubedevice exporter`: serve the node's device-to-pod metrics until SIGTERM or Ctrl-C.

Errors are one line on stderr: exit 2 for bad arguments, 1 when the listen address cannot be bound.
A PodResources socket or checkpoint that is missing or broken is not an error of the command: the
exporter serves, counts it and keeps the last good data.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import typer
from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from kubedevice.api.constants import CHECKPOINT_NAME, DEVICE_PLUGIN_PATH, POD_RESOURCES_SOCKET
from kubedevice.durations import parse_duration
from kubedevice.exporter.checkpoint_probe import CheckpointProbe
from kubedevice.exporter.collector import SnapshotCollector
from kubedevice.exporter.memory import MemoryReleaser
from kubedevice.exporter.refresh import MIN_INTERVAL_S, Refresher
from kubedevice.inventory import PodResourcesReader
from kubedevice.options import EXIT_USAGE, fail, parse_http_addr

#: Loopback only by default: the metrics name every pod of the node. The DaemonSet listens on the pod IP.
DEFAULT_LISTEN = "127.0.0.1:9478"
DEFAULT_CHECKPOINT = DEVICE_PLUGIN_PATH + CHECKPOINT_NAME

log = logging.getLogger("kubedevice.exporter")


def parse_interval(text: str) -> float:
    """Seconds (`5`, `0.5`) or a Go duration (`500ms`, `1m`); at least MIN_INTERVAL_S."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = parse_duration(text)
    if not seconds >= MIN_INTERVAL_S:  # also refuses nan
        raise ValueError(
            f"--interval {text!r} is shorter than {MIN_INTERVAL_S:g}s — use {MIN_INTERVAL_S:g}s or more: "
            "the kubelet's PodResources rate limit (100 calls/s, burst 10) is shared by every client"
        )
    return seconds


def exporter(
    podresources_socket: str = typer.Option(
        POD_RESOURCES_SOCKET, "--podresources-socket", help="The kubelet's PodResources v1 socket."
    ),
    checkpoint: str = typer.Option(
        DEFAULT_CHECKPOINT, "--checkpoint", help="The device manager's checkpoint file."
    ),
    listen: str = typer.Option(
        DEFAULT_LISTEN, "--listen", help="Serve /metrics on HOST:PORT (a bare PORT binds loopback)."
    ),
    interval: str = typer.Option(
        "10", "--interval", help=f"Seconds between refreshes (or 500ms, 1m); at least {MIN_INTERVAL_S:g}."
    ),
) -> None:
    """Export which pod holds which device-plugin device, allocatable and free devices, checkpoint health."""
    try:
        host, port = parse_http_addr(listen, "--listen")
        seconds = parse_interval(interval)
    except ValueError as err:
        fail(f"exporter: {err}" + ("" if " — " in str(err) else f" — e.g. --listen {DEFAULT_LISTEN}"))
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    MemoryReleaser().limit_arenas()
    refresher = Refresher(PodResourcesReader(podresources_socket), CheckpointProbe(checkpoint), seconds)
    try:
        code = asyncio.run(_serve(refresher, host, port))
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)


async def _serve(refresher: Refresher, host: str, port: int) -> int:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: refresher.snapshot, lock=refresher.heavy))
    ProcessCollector(registry=registry)
    try:
        # In a thread: binding may resolve a host name. The server answers scrapes on its own threads,
        # from the last published snapshot.
        server, _thread = await asyncio.to_thread(start_http_server, port, host, registry)
    except OSError as err:
        typer.echo(
            f"error: exporter: cannot listen on {host}:{port}: {err.strerror or err} — "
            "choose another --listen address",
            err=True,
        )
        return EXIT_USAGE
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    typer.echo(f"kubedevice exporter: serving http://{shown}:{bound_port}/metrics", err=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await refresher.run(stop)
    finally:
        await asyncio.to_thread(server.shutdown)
        server.server_close()
    return 0


def register(app: typer.Typer) -> None:
    """Add `exporter` to the `kubedevice` command."""
    app.command("exporter")(exporter)
