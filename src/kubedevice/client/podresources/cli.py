"""`kubedevice podresources`: ask a PodResources v1 socket (the node daemon's, or a real kubelet's) what
pods hold. Errors are one line naming what the socket turned out to be, never a raw gRPC status."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from typing import Any

import grpc
import grpc.aio
import typer
from google.protobuf.json_format import MessageToDict
from rich.table import Table

from kubedevice.api.constants import POD_RESOURCES_SOCKET
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.console import fail, make_console, shown

podresources_app = typer.Typer(
    rich_markup_mode=None,
    name="podresources",
    help="Ask a PodResources v1 socket (the node daemon's, or a real kubelet's) what pods hold.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

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
            pod, container = shown(f"{p.namespace}/{p.name}"), shown(c.name)
            if not c.devices and not c.dynamic_resources:
                table.add_row(pod, container, "", "", "")
            for d in c.devices:
                table.add_row(
                    pod, container, shown(d.resource_name), shown(",".join(d.device_ids)), _topology(d)
                )
            # DRA: one row per device of each claim (its CDI list repeats the driver's earlier devices' IDs
            # on the wire, as a kubelet's does, so devices are what the table counts).
            for dr in c.dynamic_resources:
                for r in dr.claim_resources:
                    claim = shown(f"claim {dr.claim_namespace}/{dr.claim_name} ({r.driver_name})")
                    table.add_row(pod, container, claim, shown(f"{r.pool_name}/{r.device_name}"), "-")
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
        table.add_row(shown(d.resource_name), shown(",".join(d.device_ids)), _topology(d))
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
    """Add `podresources` to the `kubedevice` command."""
    app.add_typer(podresources_app, name="podresources")
