"""`kubedevice node` and `kubedevice demo`: run the node daemon (its clients are in kubedevice.client).

Errors are one line on stderr with exit code 2 (bad arguments, an unreachable daemon or socket), never a
traceback.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import signal
import socket
from typing import TYPE_CHECKING

import typer

from kubedevice.console import parse_log_level
from kubedevice.durations import parse_duration
from kubedevice.logs import configure_logging
from kubedevice.options import (
    EXIT_USAGE,
    ROOT_HELP,
    check_folder,
    fail,
    folder_option,
    parse_http_addr,
    root_option,
)
from kubedevice.topology import TopologyConfig, TopologyConfigError, parse_option_pairs, validate_config

if TYPE_CHECKING:
    from kubedevice.node.daemon import NodeConfig


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


def _binding_timeout(text: str) -> float:
    """`--dra-binding-timeout`: at least a second, as the scheduler's `bindingTimeout` must be."""
    seconds = _duration("--dra-binding-timeout", text)
    if seconds < 1:
        fail(f"--dra-binding-timeout: duration {text!r} must be at least 1s")
    return seconds


_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NODE_NAME = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")


def _node_name(text: str | None) -> str:
    """`--node-name`, else the host name lower-cased as the kubelet does; a DNS subdomain either way."""
    name = text if text is not None else socket.gethostname().strip().lower()
    if not name or len(name) > 253 or not _NODE_NAME.fullmatch(name):
        what = f"--node-name {name!r}" if text is not None else f"the host name {name!r}"
        fail(
            f"{what} is not a node name (a DNS subdomain: lower-case letters, digits, '-' and '.') — "
            "give one with --node-name"
        )
    return name


def _topology_config(policy: str, scope: str, options: str) -> TopologyConfig:
    """The kubelet's configuration checks of the three flags, with its texts."""
    try:
        validate_config(policy, scope)
    except TopologyConfigError as err:
        fail(str(err))
    try:
        pairs = parse_option_pairs(options)
    except ValueError as err:
        fail(f"--topology-manager-policy-options: {err} — write KEY=VALUE,KEY=VALUE")
    return TopologyConfig(policy, scope, pairs)


def node(
    # Text, not Path: typer would turn "" into ".", the current folder.
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
    pod_manifest_path: str | None = typer.Option(
        None, "--pod-manifest-path", help="Folder of Pod manifests [default: ROOT/manifests].", metavar="PATH"
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
    topology_manager_policy: str = typer.Option(
        "none",
        "--topology-manager-policy",
        help="none, best-effort, restricted or single-numa-node: NUMA alignment of a pod's devices.",
    ),
    topology_manager_scope: str = typer.Option(
        "container", "--topology-manager-scope", help="container or pod: what one NUMA alignment covers."
    ),
    topology_manager_policy_options: str = typer.Option(
        "",
        "--topology-manager-policy-options",
        help="KEY=VALUE,...: prefer-closest-numa-nodes=true, max-allowable-numa-nodes=N.",
    ),
    numa_nodes: int | None = typer.Option(
        None,
        "--numa-nodes",
        help="Pretend the machine has N NUMA nodes (distance 10 local, 20 remote) [default: from sysfs].",
    ),
    log_level: str = typer.Option(
        "info",
        "--log-level",
        help="debug, info, warning or error (logs go to stderr; gRPC's own logs follow GRPC_VERBOSITY).",
    ),
    node_name: str | None = typer.Option(
        None,
        "--node-name",
        help="The node's name, for which DRA plugins publish ResourceSlices [default: the host name].",
    ),
    node_labels: str = typer.Option(
        "",
        "--node-labels",
        help="KEY=VALUE,...: the node's labels, matched by ResourceSlices' nodeSelector "
        "[kubernetes.io/hostname=NODE-NAME is set unless given].",
    ),
    dra_state_recovery: str = typer.Option(
        "refuse",
        "--dra-state-recovery",
        help="refuse or move-aside: what an unreadable dra_manager_state does at start.",
    ),
    dra_reconcile_period: str = typer.Option(
        "60s",
        "--dra-reconcile-period",
        help="How often the claims of pods that are gone are unprepared (the kubelet's reconcile pass).",
    ),
    dra_binding_timeout: str = typer.Option(
        "10m",
        "--dra-binding-timeout",
        help="How long a pod waits for its devices' binding conditions before they are allocated again.",
    ),
    boot_id: str | None = typer.Option(
        None,
        "--boot-id",
        hidden=True,
        help="Use this boot ID instead of the kernel's (tests simulate a node reboot with it).",
    ),
) -> None:
    """Run the node daemon: device manager, pods from manifests, PodResources and the status API."""
    root = root_option(root_dir)
    manifests = folder_option("--pod-manifest-path", pod_manifest_path)
    try:
        tcp = parse_http_addr(http_addr) if http_addr is not None else None
    except ValueError as err:
        fail(str(err))
    topology = _topology_config(
        topology_manager_policy, topology_manager_scope, topology_manager_policy_options
    )
    if numa_nodes is not None and numa_nodes < 1:
        fail(f"--numa-nodes: {numa_nodes} is not a NUMA node count — give 1 or more")
    if dra_state_recovery not in ("refuse", "move-aside"):
        fail(f"--dra-state-recovery {dra_state_recovery!r} is not a recovery — give refuse or move-aside")
    name = _node_name(node_name)
    from kubedevice.resource.node_labels import parse_node_labels

    try:
        labels = parse_node_labels(node_labels)
    except ValueError as err:
        fail(f"--node-labels: {err} — write KEY=VALUE,KEY=VALUE with label keys and values")
    check_folder("--root-dir", root)
    if manifests is not None:
        check_folder("--pod-manifest-path", manifests)
    # Here: `node --help` and a refused flag need no daemon (the manager, gRPC, the checkpoint code).
    from kubedevice.node.daemon import NodeConfig

    config = NodeConfig(
        root_dir=root,
        pod_manifest_path=manifests,
        stop_grace_period=_duration("--stop-grace-period", stop_grace_period),
        http_addr=tcp,
        admission_wait=_duration("--admission-wait", admission_wait),
        allow_symlinks=allow_symlinks,
        plugin_timeout=_positive_duration("--plugin-timeout", plugin_timeout),
        boot_id=boot_id,
        topology=topology,
        numa_nodes=numa_nodes,
        node_name=name,
        node_labels=labels,
        dra_reconcile_period=_positive_duration("--dra-reconcile-period", dra_reconcile_period),
        dra_state_recovery="move-aside" if dra_state_recovery == "move-aside" else "refuse",
        dra_binding_timeout=_binding_timeout(dra_binding_timeout),
    )
    configure_logging(parse_log_level(log_level))
    # Sockets the daemon and its manager create must not be world-accessible.
    os.umask(0o007)
    # What exists now (the imported modules: most of the process's objects) lives as long as the daemon.
    # Frozen, it is never walked again by the cyclic collector, whose passes during the restart and every
    # full collection after it would otherwise cross it each time.
    gc.freeze()
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
    from kubedevice.node.daemon import NodeDaemon, NodeStartError

    daemon = NodeDaemon(config)
    try:
        await daemon.start()
    except NodeStartError as err:
        typer.echo(f"error: node: {err}", err=True)
        return EXIT_USAGE
    except OSError as err:
        typer.echo(f"error: node: {err.filename or 'start-up'}: {err.strerror or err}", err=True)
        return EXIT_USAGE
    await stop.wait()
    logging.getLogger(__name__).info("stopping")
    await daemon.stop()
    return 0


def demo() -> None:
    """Play the node's stories with real processes: admission, restarts, a plugin death, DRA claims."""
    from kubedevice.node.demo import run_demo

    raise typer.Exit(run_demo())


def register(app: typer.Typer) -> None:
    """Add `node` and `demo` to the `kubedevice` command (the clients are in kubedevice.client)."""
    app.command("node")(node)
    app.command("demo")(demo)
