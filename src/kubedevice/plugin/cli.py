"""`kubedevice plugin ...`: the ready plugins as commands.

Other tools run these as subprocesses and read stdout, so the contract is: one line per lifecycle
event on stdout (flushed), logs on stderr, exit 0 on SIGTERM/SIGINT, exit 2 with one line on stderr
for any bad flag or unusable setting. When stdout and stderr are one terminal, the log leaves the events
to stdout (it says them at debug level), so each shows once.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import typer

from kubedevice.api.constants import PLUGIN_DIR_ENV
from kubedevice.console import fail, parse_log_level
from kubedevice.logs import configure_logging
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.builtin.fake import FakeConfig, FakePlugin, NumaLayout, parse_attribute, parse_capacity
from kubedevice.plugin.builtin.fake_dra import DRAShape, parse_taint
from kubedevice.plugin.builtin.paths import PathsPlugin
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIR
from kubedevice.plugin.dra.backend import cluster_mode
from kubedevice.plugin.dra.paths import (
    DEFAULT_KUBELET_DIR,
    KUBELET_DIR_ENV,
    cdi_spec_dir,
    resolve_kubelet_dir,
)
from kubedevice.plugin.dra.runner import FacesServer
from kubedevice.plugin.entry import events_share_the_log, print_event
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
    #: The kubelet's folder (--kubelet-dir, else its default), which the default CDI folder follows.
    kubelet_dir: Path


@dataclass(frozen=True)
class _DRA:
    """Where and how the DRA face runs (`kubedevice plugin fake --driver ...`)."""

    api: str
    kubelet_dir: str | None
    kubeconfig: str | None
    node_name: str | None
    rolling_update_uid: str


def _common(
    plugin_dir: str | None,
    plugin_watcher: bool,
    registry_dir: str,
    metrics_port: int | None,
    inotify: bool,
    log_level: str,
    kubelet_dir: str | None = None,
) -> _Common:
    parse_log_level(log_level)
    for flag, folder in (("--plugin-dir", plugin_dir), ("--registry-dir", registry_dir)):
        if folder is not None and not folder.strip():
            fail(f"{flag} is empty — give a folder, or leave the option out for its default")
    # The kubelet's layout: its device plugin folder sits in the kubelet folder, unless named apart.
    kubelet = resolve_kubelet_dir(kubelet_dir)
    directory = plugin_dir or str(kubelet / "device-plugins")
    return _Common(directory, plugin_watcher, registry_dir, metrics_port, inotify, log_level.upper(), kubelet)


PLUGIN_DIR = typer.Option(
    None,
    "--plugin-dir",
    envvar=PLUGIN_DIR_ENV,
    help="The kubelet's device plugin directory.  [default: <kubelet dir>/device-plugins, "
    f"{DEFAULT_PLUGIN_DIR}]",
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
    resource: str = typer.Option(
        "", "--resource", help="Extended resource name, e.g. example.com/fake (the device plugin face)."
    ),
    driver: str = typer.Option("", "--driver", help="DRA driver name, e.g. gpu.example.com (the DRA face)."),
    api: str = typer.Option(
        "",
        "--api",
        help="device-plugin, dra or both (both: the first half of the devices on the device plugin face, "
        "the rest on DRA). Default: device-plugin with --resource, else dra.",
    ),
    attribute: list[str] = typer.Option(
        [], "--attribute", help="NAME=VALUE published on every DRA device (int, true/false, else string)."
    ),
    capacity: list[str] = typer.Option([], "--capacity", help="NAME=QUANTITY published on every DRA device."),
    partitions: int = typer.Option(
        0,
        "--partitions",
        min=0,
        help="DRA: MIG-style GPUs: each <id> a counter set <id>-counters (memory 80Gi, compute 100), N "
        "devices <id>-partition-<j> using an N-th of it and <id>-full using all of it.",
    ),
    shared: bool = typer.Option(
        False,
        "--shared",
        help="DRA: devices shared by several claims (allowMultipleAllocations), memory and compute "
        "consumed per claim in steps of 1Gi and 1.",
    ),
    net: bool = typer.Option(
        False,
        "--net",
        help="DRA: NICs nic-<id> as the dra-example-driver's net profile: shared, ingressBandwidth and "
        "egressBandwidth of 100G (1G unless a claim asks; 100M to 100G in steps of 1M), 100 vfs, 1 a claim.",
    ),
    taint: list[str] = typer.Option(
        [],
        "--taint",
        help="DRA: KEY[=VALUE]:EFFECT[@DEVICE] on that device (every device without @); effects "
        'NoSchedule, NoExecute, None. At run time: the health file\'s "taints".',
    ),
    health_taint: str | None = typer.Option(
        None,
        "--health-taint",
        help="DRA: publish unhealthy devices with this KEY[=VALUE]:EFFECT instead of leaving them out.",
    ),
    binding_delay: float | None = typer.Option(
        None,
        "--binding-delay",
        min=0,
        help="DRA: devices with binding conditions (BindingConditions), set True this many seconds after "
        "the fake sees a claim allocated one (it polls the claims with its devices).",
    ),
    kubelet_dir: str | None = typer.Option(
        None, "--kubelet-dir", envvar=KUBELET_DIR_ENV, help="The kubelet's folder, for the DRA face."
    ),
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", help="DRA cluster mode: publish to and read claims from this cluster."
    ),
    node_name: str | None = typer.Option(
        None, "--node-name", help="DRA: this node's name (else $NODE_NAME)."
    ),
    rolling_update_uid: str = typer.Option(
        "", "--rolling-update-uid", help="DRA: this pod's UID, to run beside the instance it replaces."
    ),
    devices: int = typer.Option(
        ...,
        "--devices",
        min=0,
        help="How many devices: fake-0 .. fake-<N-1>; with --driver (DRA, or both faces) named after its "
        "first label, gpu.example.com: gpu-0 .. gpu-<N-1>.",
    ),
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
    cdi_spec_dir: Path | None = typer.Option(
        None,
        "--cdi-spec-dir",
        help="Where --cdi writes the spec (removed again on stop) and DRA its specs.  [default: "
        f"{DEFAULT_SPEC_DIR}; <kubelet dir>/cdi when --kubelet-dir is not {DEFAULT_KUBELET_DIR} and "
        "no --kubeconfig]",
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
    plugin_dir: str | None = PLUGIN_DIR,
    plugin_watcher: bool = PLUGIN_WATCHER,
    registry_dir: str = REGISTRY_DIR,
    metrics_port: int | None = METRICS_PORT,
    inotify: bool = INOTIFY,
    log_level: str = LOG_LEVEL,
) -> None:
    """Fake devices: for tests, demos and conformance runs."""
    common = _common(plugin_dir, plugin_watcher, registry_dir, metrics_port, inotify, log_level, kubelet_dir)
    if not resource and not driver:
        _usage_error("give --resource (the device plugin API), --driver (DRA) or both")
    chosen_api = api or ("device-plugin" if resource else "dra")
    if chosen_api not in ("device-plugin", "dra", "both"):
        _usage_error(f"--api must be device-plugin, dra or both, got {api!r}")
    if chosen_api != "dra" and not resource:
        _usage_error(f"--api {chosen_api} needs --resource (the extended resource name)")
    if chosen_api != "device-plugin" and not driver:
        _usage_error(f"--api {chosen_api} needs --driver (the DRA driver name)")
    try:
        attributes = dict(parse_attribute(a) for a in attribute)
        capacities = dict(parse_capacity(c) for c in capacity)
        taints = tuple(parse_taint(t) for t in taint)
        shape = DRAShape(partitions, shared, binding_delay, net)
    except ConfigError as exc:
        _usage_error(str(exc))
    unhealthy_taint = None
    if health_taint is not None:
        try:
            device, unhealthy_taint = parse_taint(health_taint, flag="--health-taint")
        except ConfigError as exc:
            _usage_error(str(exc))
        if device is not None:
            _usage_error(
                f"--health-taint {health_taint!r} applies to every unhealthy device — drop @{device}"
            )
    dra = _DRA(chosen_api, kubelet_dir, kubeconfig, node_name, rolling_update_uid)
    if numa_layout not in ("round-robin", "block"):
        _usage_error(f"--numa-layout must be round-robin or block, got {numa_layout!r}")
    layout: NumaLayout = "block" if numa_layout == "block" else "round-robin"
    if replicas is not None and chosen_api != "device-plugin":
        _usage_error(
            "--replicas shares devices on the device plugin API only — drop it or use --api device-plugin"
        )
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
                cdi_spec_dir=str(cdi_spec_dir) if cdi_spec_dir is not None else None,
                health_file=str(health_file) if health_file is not None else None,
                poll_interval=poll_interval,
                driver=driver,
                api=dra.api,  # type: ignore[arg-type]
                attributes=attributes,
                capacity=capacities,
                shape=shape,
                taints=taints,
                health_taint=unhealthy_taint,
            )
        ),
        replicas=replicas,
        refuse_multiple=refuse_multiple,
        dra=dra,
    )


@app.command("paths")
def paths(
    resource: str = typer.Option(..., "--resource", help="Extended resource name, e.g. example.com/serial."),
    pattern: str = typer.Option(..., "--glob", help="Absolute glob of host files, e.g. '/dev/ttyUSB*'."),
    count: int = typer.Option(1, "--count", min=1, help="How many containers may share one file."),
    mount: bool = typer.Option(False, "--mount", help="Bind-mount the files instead of device nodes."),
    poll_interval: float = POLL_INTERVAL,
    plugin_dir: str | None = PLUGIN_DIR,
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
    dra: _DRA | None = None,
) -> None:
    configure_logging(parse_log_level(common.log_level))
    try:
        plugin = make_plugin()
        if replicas is not None:
            plugin = SharedPlugin(plugin, replicas, refuse_multiple=refuse_multiple)
        options = {
            "plugin_watcher": common.plugin_watcher,
            "registry_dir": common.registry_dir,
            "metrics_port": common.metrics_port,
            "use_inotify": common.inotify,
            "handle_signals": True,
            "on_event": print_event,
            "log_events": not events_share_the_log(),
        }
        if dra is None or dra.api == "device-plugin":
            options["cdi_spec_dir"] = cdi_spec_dir(
                plugin.cdi_spec_dir, common.kubelet_dir, cluster=cluster_mode(None)
            )
            asyncio.run(PluginServer(plugin, common.plugin_dir, **options).run())  # type: ignore[arg-type]
        else:
            asyncio.run(_run_faces(plugin, common, dra, options))
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


async def _run_faces(plugin: DevicePlugin, common: _Common, dra: _DRA, options: dict[str, object]) -> None:
    server = FacesServer(
        plugin,
        dra.api,
        kubelet_dir=dra.kubelet_dir,
        kubeconfig=dra.kubeconfig,
        node_name=dra.node_name,
        rolling_update_uid=dra.rolling_update_uid,
        dra_options={"use_inotify": common.inotify},
        plugin_dir=common.plugin_dir,
        **options,  # type: ignore[arg-type]
    )
    await server.run()


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m kubedevice.plugin.cli ARGS` runs `kubedevice plugin ARGS`, through the root command."""
    from kubedevice.cli_group import app as root

    root(args=["plugin", *(sys.argv[1:] if argv is None else argv)], prog_name="kubedevice")


if __name__ == "__main__":
    main()
