"""`kubedevice node|status|pods|podresources|demo`: run the node daemon and look into it.

Errors are one line on stderr with exit code 2 (bad arguments, an unreachable daemon or socket), never a
traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import grpc
import grpc.aio
import typer
from google.protobuf.json_format import MessageToDict
from rich.table import Table

from kubedevice.api.constants import POD_RESOURCES_SOCKET
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.console import make_console
from kubedevice.node.daemon import NodeConfig, NodeDaemon, NodePaths, NodeStartError
from kubedevice.node.durations import parse_duration
from kubedevice.node.http import StatusClientError, get
from kubedevice.node.tables import print_node, print_pods

EXIT_USAGE = 2

podresources_app = typer.Typer(
    name="podresources",
    help="Ask a PodResources v1 socket (the node daemon's, or a real kubelet's) what pods hold.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def default_root_dir() -> Path:
    """A per-user state folder; never the real kubelet's /var/lib/kubelet."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state else Path.home() / ".local" / "state"
    return base / "kubedevice"


def parse_http_addr(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or just `PORT` (then loopback)."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--http-addr {text!r}: expected HOST:PORT or PORT with a port from 0 to 65535")
    return host, int(port_text)


def _duration(option: str, text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        _fail(f"{option}: {err}")


def _positive_duration(option: str, text: str) -> float:
    seconds = _duration(option, text)
    if seconds <= 0:
        _fail(f"{option}: duration {text!r} must be more than zero")
    return seconds


_ROOT_HELP = "The daemon's state folder [default: $XDG_STATE_HOME/kubedevice or ~/.local/state/kubedevice]."


def node(
    root_dir: Path | None = typer.Option(None, "--root-dir", help=_ROOT_HELP),
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
        _fail(str(err))
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


def _status_get(root_dir: Path | None, path: str) -> Any:
    paths = NodePaths.under(root_dir if root_dir is not None else default_root_dir())
    try:
        body = asyncio.run(get(paths.status_socket, path))
    except StatusClientError as err:
        _fail(str(err))
    return json.loads(body)


def status(
    root_dir: Path | None = typer.Option(None, "--root-dir", help=_ROOT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer."),
) -> None:
    """The node's device-plugin resources: capacity, allocatable, devices, endpoints."""
    data = _status_get(root_dir, "/node")
    if as_json:
        typer.echo(json.dumps(data, indent=1))
    else:
        print_node(make_console(), data)


def pods(
    root_dir: Path | None = typer.Option(None, "--root-dir", help=_ROOT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer."),
) -> None:
    """The node's pods: phase, devices and run options per container, and manifests that could not be read."""
    data = _status_get(root_dir, "/pods")
    if as_json:
        typer.echo(json.dumps(data, indent=1))
    else:
        print_pods(make_console(), data)


# ----------------------------------------------------------------------------------------------------
# PodResources client

_SOCKET_OPTION = typer.Option(POD_RESOURCES_SOCKET, "--socket", help="The PodResources socket.")
_JSON_OPTION = typer.Option(False, "--json", help="Print the answer as JSON.")


async def _call(target: str, method: str, request: Any) -> Any:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pr_grpc.PodResourcesListerStub(channel)
        return await getattr(stub, method)(request, timeout=10.0)


def _podresources(socket: str, method: str, request: Any) -> Any:
    if not os.path.exists(socket):
        _fail(f"no PodResources socket at {socket}")
    try:
        return asyncio.run(_call("unix://" + os.path.abspath(socket), method, request))
    except grpc.aio.AioRpcError as err:
        code = err.code()
        name = code.name if code is not None else "UNKNOWN"
        _fail(f"PodResources {method} at {socket}: {name}: {err.details()}")


def _topology(d: pr.ContainerDevices) -> str:
    return ",".join(str(n.ID) for n in d.topology.nodes) if d.HasField("topology") else "-"


def _print_pod_resources(pod_resources: list[pr.PodResources]) -> None:
    table = Table(title="Pod resources")
    for column in ("namespace/name", "container", "resource", "device", "numa"):
        table.add_column(column)
    for p in pod_resources:
        for c in p.containers:
            if not c.devices:
                table.add_row(f"{p.namespace}/{p.name}", c.name, "", "", "")
            for d in c.devices:
                table.add_row(
                    f"{p.namespace}/{p.name}", c.name, d.resource_name, ",".join(d.device_ids), _topology(d)
                )
    make_console().print(table)


def _echo_json(message: Any) -> None:
    typer.echo(json.dumps(MessageToDict(message), indent=1))


@podresources_app.command("list")
def podresources_list(socket: str = _SOCKET_OPTION, as_json: bool = _JSON_OPTION) -> None:
    """List: the devices of every active pod's containers."""
    resp = _podresources(socket, "List", pr.ListPodResourcesRequest())
    if as_json:
        _echo_json(resp)
    else:
        _print_pod_resources(list(resp.pod_resources))


@podresources_app.command("allocatable")
def podresources_allocatable(socket: str = _SOCKET_OPTION, as_json: bool = _JSON_OPTION) -> None:
    """GetAllocatableResources: the node's healthy devices."""
    resp = _podresources(socket, "GetAllocatableResources", pr.AllocatableResourcesRequest())
    if as_json:
        _echo_json(resp)
        return
    table = Table(title="Allocatable devices")
    for column in ("resource", "device", "numa"):
        table.add_column(column)
    for d in resp.devices:
        table.add_row(d.resource_name, ",".join(d.device_ids), _topology(d))
    make_console().print(table)


@podresources_app.command("get")
def podresources_get(
    name: str = typer.Argument(..., help="The pod's name."),
    namespace: str = typer.Option("default", "-n", "--namespace", help="The pod's namespace."),
    socket: str = _SOCKET_OPTION,
    as_json: bool = _JSON_OPTION,
) -> None:
    """Get: the devices of one pod's containers."""
    resp = _podresources(socket, "Get", pr.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace))
    if as_json:
        _echo_json(resp)
    else:
        _print_pod_resources([resp.pod_resources])


def demo() -> None:
    """Play the device manager's stories with real processes: admission, a kubelet restart, a plugin death."""
    from kubedevice.node.demo import run_demo

    raise typer.Exit(run_demo())


def register(app: typer.Typer) -> None:
    """Add the node daemon's commands to the `kubedevice` command."""
    app.command("node")(node)
    app.command("status")(status)
    app.command("pods")(pods)
    app.add_typer(podresources_app, name="podresources")
    app.command("demo")(demo)
