"""The node daemon's status API clients: `kubedevice status`, `kubedevice pods` and `kubedevice claims`.

Kept apart from the daemon's own command so that asking a running daemon loads no device manager, and the
daemon loads no tables; and apart from `podresources` so that asking it loads no gRPC. rich is imported
only to print a table: a script's `--json` and an error need none.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import typer

from kubedevice.console import make_console
from kubedevice.options import ROOT_HELP, fail, root_option
from kubedevice.statusapi import contract
from kubedevice.statusapi.client import StatusClient, StatusClientError
from kubedevice.statusapi.paths import NodePaths


def _node_paths(root_dir: str | None) -> NodePaths:
    return NodePaths.under(root_option(root_dir))


def _status_get(root_dir: str | None, path: str) -> Any:
    daemon = StatusClient(_node_paths(root_dir).status_socket)
    try:
        return asyncio.run(daemon.get_json(path))
    except StatusClientError as err:
        fail(str(err))


def _wait_allocatable(root_dir: str | None, resources: list[str], timeout: float) -> Any:
    """The daemon's /node answer once every resource has an allocatable device.

    A daemon that is not answering yet is waited for too: the README starts it in the background and
    asks right after. A pod written before its plugin registered would run without devices, as on the
    kubelet, so scripts wait here before they write pods.
    """
    paths = _node_paths(root_dir)
    daemon = StatusClient(paths.status_socket)
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = asyncio.run(daemon.get_node())
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
    """The node's device-plugin resources and DRA drivers: capacity, allocatable, devices, endpoints."""
    data = (
        _wait_allocatable(root_dir, wait_for, timeout) if wait_for else _status_get(root_dir, contract.NODE)
    )
    if as_json:
        typer.echo(json.dumps(data, indent=1))
    else:
        from kubedevice.statusapi.tables import print_node

        print_node(make_console(), data)


def pods(
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer."),
) -> None:
    """The node's pods: phase, devices and run options per container, and manifests that could not be read."""
    data = _status_get(root_dir, contract.PODS)
    if as_json:
        typer.echo(json.dumps(data, indent=1))
    else:
        from kubedevice.statusapi.tables import print_pods

        print_pods(make_console(), data)


def claims(
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer (/claims)."),
) -> None:
    """The node's ResourceClaims: allocation, reservation, prepared or not, CDI devices, pods."""
    data = _status_get(root_dir, contract.CLAIMS)
    if as_json:
        typer.echo(json.dumps(data, indent=1))
    else:
        from kubedevice.statusapi.tables import print_claims

        print_claims(make_console(), data)


def register(app: typer.Typer) -> None:
    """Add `status`, `pods` and `claims` to the `kubedevice` command."""
    app.command("status")(status)
    app.command("pods")(pods)
    app.command("claims")(claims)
