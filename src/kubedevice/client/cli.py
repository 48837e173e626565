"""The node daemon's clients: `kubedevice status`, `kubedevice pods` and `kubedevice podresources`.

Kept apart from the daemon's own command so that asking a running daemon loads no device manager,
and the daemon loads no tables.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from typing import Any

import grpc
import grpc.aio
import typer
from google.protobuf.json_format import MessageToDict
from rich.table import Table

from kubedevice.api.constants import POD_RESOURCES_SOCKET
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.console import make_console
from kubedevice.node.config import NodePaths
from kubedevice.node.http import StatusClientError, get
from kubedevice.node.options import ROOT_HELP, fail, root_option
from kubedevice.node.tables import print_node, print_pods

podresources_app = typer.Typer(
    rich_markup_mode=None,
    name="podresources",
    help="Ask a PodResources v1 socket (the node daemon's, or a real kubelet's) what pods hold.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _node_paths(root_dir: str | None) -> NodePaths:
    return NodePaths.under(root_option(root_dir))


def _status_get(root_dir: str | None, path: str) -> Any:
    paths = _node_paths(root_dir)
    try:
        body = asyncio.run(get(paths.status_socket, path))
    except StatusClientError as err:
        fail(str(err))
    return json.loads(body)


def _wait_allocatable(root_dir: str | None, resources: list[str], timeout: float) -> Any:
    """The daemon's /node answer once every resource has an allocatable device.

    A daemon that is not answering yet is waited for too: the README starts it in the background and
    asks right after. A pod written before its plugin registered would run without devices, as on the
    kubelet, so scripts wait here before they write pods.
    """
    paths = _node_paths(root_dir)
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = json.loads(asyncio.run(get(paths.status_socket, "/node")))
        except StatusClientError as err:
            problem = f"{err} after {timeout:g} s — start the daemon, then its plugins"
        else:
            missing = [r for r in resources if int(data["allocatable"].get(r, 0)) == 0]
            if not missing:
                return data
            problem = (
                f"{', '.join(missing)}: no allocatable device after {timeout:g} s — start its plugin with "
                f"--plugin-dir {paths.plugin_dir} (`kubedevice status` shows what registered)"
            )
        if time.monotonic() >= deadline:
            fail(problem, 1)
        time.sleep(0.1)


def status(
    # Text, not Path: typer would turn "" into ".", the current folder.
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer."),
    wait_for: list[str] = typer.Option(
        [],
        "--wait-for",
        help="Wait until this resource has an allocatable device (repeatable), then print the status.",
    ),
    timeout: float = typer.Option(30.0, "--timeout", min=0, help="Seconds --wait-for waits at most."),
) -> None:
    """The node's device-plugin resources: capacity, allocatable, devices, endpoints."""
    data = _wait_allocatable(root_dir, wait_for, timeout) if wait_for else _status_get(root_dir, "/node")
    if as_json:
        typer.echo(json.dumps(data, indent=1))
    else:
        print_node(make_console(), data)


def pods(
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
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
    _check_socket(socket)
    try:
        return asyncio.run(_call("unix://" + os.path.abspath(socket), method, request))
    except grpc.aio.AioRpcError as err:
        fail(_describe_rpc_error(socket, err))


def _check_socket(socket: str) -> None:
    try:
        mode = os.stat(socket).st_mode
    except FileNotFoundError:
        fail(f"nothing listens at {socket} — start the kubelet or `kubedevice node`, or pass --socket")
    except OSError as err:
        fail(f"cannot use {socket}: {err.strerror} — pass --socket with a PodResources socket")
    if not stat.S_ISSOCK(mode):
        fail(f"{socket} is not a socket — pass --socket with the PodResources socket (a kubelet.sock)")


def _describe_rpc_error(socket: str, err: grpc.aio.AioRpcError) -> str:
    """The failure in words: what the socket turned out to be, or what the server said, never a raw status."""
    code, details = err.code(), err.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        if "http" in details.lower():
            return f"{socket} is not a PodResources socket (it answers HTTP) — pass --socket with another"
        return f"nothing listens at {socket} (a stale socket file) — start the kubelet or `kubedevice node`"
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return f"{socket} is not a PodResources socket (it serves no PodResources v1) — pass --socket"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"{socket} did not answer within 10 s — is its server hung?"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return f"{socket} refused the call by its rate limit — try again in a moment"
    if code == grpc.StatusCode.NOT_FOUND:
        return f"{details} — `kubedevice podresources list` shows the pods"
    return f"{socket} failed the call: {details or 'no details'}"


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


def register(app: typer.Typer) -> None:
    """Add `status`, `pods` and `podresources` to the `kubedevice` command."""
    app.command("status")(status)
    app.command("pods")(pods)
    app.add_typer(podresources_app, name="podresources")
