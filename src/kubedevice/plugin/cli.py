"""`kubedevice plugin ...`: the ready plugins as commands.

Other tools run these as subprocesses and read stdout, so the contract is: one line per lifecycle
event on stdout (flushed), logs on stderr, exit 0 on SIGTERM/SIGINT, exit 2 with one line on stderr
for any bad flag or unusable setting.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import typer

from kubedevice.api.constants import PLUGIN_DIR_ENV
from kubedevice.console import fail, parse_log_level
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.builtin.fake import FakeConfig, FakePlugin, NumaLayout
from kubedevice.plugin.builtin.paths import PathsPlugin
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIR
from kubedevice.plugin.entry import print_event
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.server import DEFAULT_PLUGIN_DIR, DEFAULT_REGISTRY_DIR, PluginServer
from kubedevice.plugin.sharing import SharedPlugin


def _usage_error(message: str) -> NoReturn:
    fail(message)


app = typer.Typer(
    rich_markup_mode=None,
    name="plugin",
    help="Run a ready device plugin beside a kubelet (or kubedevice's node daemon).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclass(frozen=True)
class _Common:
    plugin_dir: str
    plugin_watcher: bool
    registry_dir: str
    metrics_port: int | None
    inotify: bool
    log_level: str


def _common(
    plugin_dir: str,
    plugin_watcher: bool,
    registry_dir: str,
    metrics_port: int | None,
    inotify: bool,
    log_level: str,
) -> _Common:
    parse_log_level(log_level)
    for flag, folder in (("--plugin-dir", plugin_dir), ("--registry-dir", registry_dir)):
        if not folder.strip():
            fail(f"{flag} is empty — give a folder, or leave the option out for its default")
    return _Common(plugin_dir, plugin_watcher, registry_dir, metrics_port, inotify, log_level.upper())


PLUGIN_DIR = typer.Option(
    DEFAULT_PLUGIN_DIR, "--plugin-dir", envvar=PLUGIN_DIR_ENV, help="The kubelet's device plugin directory."
)
PLUGIN_WATCHER = typer.Option(
    False, "--plugin-watcher", help="Register through the kubelet's plugin watcher instead of kubelet.sock."
)
REGISTRY_DIR = typer.Option(DEFAULT_REGISTRY_DIR, "--registry-dir", help="The plugin watcher's directory.")
METRICS_PORT = typer.Option(None, "--metrics-port", min=0, max=65535, help="Serve Prometheus metrics here.")
INOTIFY = typer.Option(
    True, "--inotify/--no-inotify", help="Watch for kubelet restarts with inotify, or poll."
)
LOG_LEVEL = typer.Option("info", "--log-level", help="debug, info, warning or error (logs go to stderr).")
POLL_INTERVAL = typer.Option(1.0, "--poll-interval", min=0.001, help="Seconds between two device scans.")


@app.command("fake")
def fake(
    resource: str = typer.Option(..., "--resource", help="Extended resource name, e.g. example.com/fake."),
    devices: int = typer.Option(..., "--devices", min=0, help="How many devices: fake-0 .. fake-<N-1>."),
    numa_nodes: int = typer.Option(
        0, "--numa-nodes", min=0, help="Spread devices over this many NUMA nodes."
    ),
    numa_layout: str = typer.Option("round-robin", "--numa-layout", help="round-robin or block."),
    unhealthy: str = typer.Option("", "--unhealthy", help="Comma-separated IDs reported unhealthy."),
    preferred: bool = typer.Option(False, "--preferred", help="Offer GetPreferredAllocation (NUMA-packed)."),
    prestart: bool = typer.Option(False, "--prestart", help="Require PreStartContainer."),
    cdi: bool = typer.Option(
        False, "--cdi", help="Write a CDI spec (kind: the resource); Allocate answers its device names."
    ),
    cdi_spec_dir: Path = typer.Option(
        DEFAULT_SPEC_DIR, "--cdi-spec-dir", help="Where --cdi writes the spec; removed again on stop."
    ),
    health_file: Path | None = typer.Option(
        None, "--health-file", help="JSON list of unhealthy IDs, re-read when it changes."
    ),
    replicas: int | None = typer.Option(
        None,
        "--replicas",
        min=1,
        help="Share each device: advertise it as N replicas <id>::0 .. <id>::<N-1>.",
    ),
    refuse_multiple: bool = typer.Option(
        False, "--refuse-multiple", help="With --replicas: refuse a container asking for more than 1 replica."
    ),
    poll_interval: float = POLL_INTERVAL,
    plugin_dir: str = PLUGIN_DIR,
    plugin_watcher: bool = PLUGIN_WATCHER,
    registry_dir: str = REGISTRY_DIR,
    metrics_port: int | None = METRICS_PORT,
    inotify: bool = INOTIFY,
    log_level: str = LOG_LEVEL,
) -> None:
    """Fake devices: for tests, demos and conformance runs."""
    common = _common(plugin_dir, plugin_watcher, registry_dir, metrics_port, inotify, log_level)
    if numa_layout not in ("round-robin", "block"):
        _usage_error(f"--numa-layout must be round-robin or block, got {numa_layout!r}")
    layout: NumaLayout = "block" if numa_layout == "block" else "round-robin"
    if refuse_multiple and replicas is None:
        _usage_error("--refuse-multiple applies to shared devices only — add --replicas N or drop it")
    ids = frozenset(part.strip() for part in unhealthy.split(",") if part.strip())
    _run(
        common,
        lambda: FakePlugin(
            FakeConfig(
                resource=resource,
                count=devices,
                numa_nodes=numa_nodes,
                numa_layout=layout,
                unhealthy=ids,
                preferred=preferred,
                prestart=prestart,
                cdi=cdi,
                cdi_spec_dir=str(cdi_spec_dir),
                health_file=str(health_file) if health_file is not None else None,
                poll_interval=poll_interval,
            )
        ),
        replicas=replicas,
        refuse_multiple=refuse_multiple,
    )


@app.command("paths")
def paths(
    resource: str = typer.Option(..., "--resource", help="Extended resource name, e.g. example.com/serial."),
    pattern: str = typer.Option(..., "--glob", help="Absolute glob of host files, e.g. '/dev/ttyUSB*'."),
    count: int = typer.Option(1, "--count", min=1, help="How many containers may share one file."),
    mount: bool = typer.Option(False, "--mount", help="Bind-mount the files instead of device nodes."),
    poll_interval: float = POLL_INTERVAL,
    plugin_dir: str = PLUGIN_DIR,
    plugin_watcher: bool = PLUGIN_WATCHER,
    registry_dir: str = REGISTRY_DIR,
    metrics_port: int | None = METRICS_PORT,
    inotify: bool = INOTIFY,
    log_level: str = LOG_LEVEL,
) -> None:
    """Host device files matching a glob, each shareable by --count containers."""
    common = _common(plugin_dir, plugin_watcher, registry_dir, metrics_port, inotify, log_level)
    _run(
        common, lambda: PathsPlugin(resource, pattern, count=count, mount=mount, poll_interval=poll_interval)
    )


def _run(
    common: _Common,
    make_plugin: Callable[[], DevicePlugin],
    replicas: int | None = None,
    refuse_multiple: bool = False,
) -> None:
    # gRPC core logs every GOAWAY of a restarting kubelet at INFO on stderr; that is normal here.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    logging.basicConfig(
        level=common.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        plugin = make_plugin()
        if replicas is not None:
            plugin = SharedPlugin(plugin, replicas, refuse_multiple=refuse_multiple)
        server = PluginServer(
            plugin,
            common.plugin_dir,
            plugin_watcher=common.plugin_watcher,
            registry_dir=common.registry_dir,
            metrics_port=common.metrics_port,
            use_inotify=common.inotify,
            handle_signals=True,
            on_event=print_event,
        )
        asyncio.run(server.run())
    except ConfigError as exc:
        _usage_error(str(exc))
    except OSError as exc:
        # e.g. the metrics port is taken: a setting that cannot be used, as in every command (exit 2, one
        # line, the errno's text rather than "[Errno 98] ...").
        reason = exc.strerror or str(exc)
        if exc.filename:
            fail(f"{exc.filename}: {reason} — check --plugin-dir and --registry-dir")
        if common.metrics_port is not None:  # the one listen address of a plugin
            port = common.metrics_port
            fail(f"cannot serve metrics on port {port}: {reason} — choose another --metrics-port")
        fail(f"{reason} — check the plugin's settings")


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m kubedevice.plugin.cli ARGS` runs `kubedevice plugin ARGS`, through the root command."""
    from kubedevice.cli_group import app as root

    root(args=["plugin", *(sys.argv[1:] if argv is None else argv)], prog_name="kubedevice")


if __name__ == "__main__":
    main()
