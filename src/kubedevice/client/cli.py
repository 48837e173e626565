"""The node daemon's status API clients: `kubedevice status`, `kubedevice pods` and `kubedevice claims`
(with `claims set-status`, a driver's `status.devices` written by hand).

Kept apart from the daemon's own command so that asking a running daemon loads no device manager, and the
daemon loads no tables; and apart from `podresources` so that asking it loads no gRPC. rich is imported
only to print a table: a script's `--json` and an error need none.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import typer

from kubedevice.console import make_console
from kubedevice.options import ROOT_HELP, fail, root_option
from kubedevice.statusapi import contract
from kubedevice.statusapi.client import ClaimStatusRefused, StatusClient, StatusClientError
from kubedevice.statusapi.paths import NodePaths
from kubedevice.wording import counted


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


claims_app = typer.Typer(
    rich_markup_mode=None,
    name="claims",
    help=(
        "The node's ResourceClaims: allocation, reservation, prepared or not, CDI devices, pods, device "
        "status."
    ),
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@claims_app.callback()
def claims(
    ctx: typer.Context,
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer (/claims)."),
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    data = _status_get(root_dir, contract.CLAIMS)
    if as_json:
        typer.echo(json.dumps(data, indent=1))
    else:
        from kubedevice.statusapi.tables import print_claims

        print_claims(make_console(), data)


@claims_app.command("set-status")
def set_status(
    claim: str = typer.Argument(
        ..., metavar="[NAMESPACE/]NAME", help="The claim (namespace `default` if none)."
    ),
    driver: str = typer.Option(
        ..., "--driver", help="The DRA driver that writes: its entries only are written."
    ),
    file: str = typer.Option(
        ...,
        "--file",
        metavar="PATH",
        help='The entries, JSON or YAML: {"devices": [...]} or the list alone; - reads standard input.',
    ),
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
) -> None:
    """Write a driver's entries of a claim's status.devices, as the driver would.

    Each entry names an allocated device (driver, pool, device, shareID) and holds its conditions, data and
    networkData. The entries replace those the driver wrote before (an empty list removes them); other
    drivers' entries stay. The daemon validates them as the API server does and keeps them across restarts."""
    namespace, _, name = claim.rpartition("/") if "/" in claim else ("default", "", claim)
    if not namespace or not name or "/" in namespace:
        fail(f"{claim!r} is not [NAMESPACE/]NAME — name one claim, e.g. default/gpu-claim")
    devices = _status_entries(file)
    daemon = StatusClient(_node_paths(root_dir).status_socket)
    try:
        answer = asyncio.run(daemon.put_claim_status(namespace, name, driver=driver, devices=devices))
    except ClaimStatusRefused as err:
        fail(f"{err} — {'fix the entries and' if err.code in (400, 422) else 'then'} run it again", 1)
    except StatusClientError as err:
        fail(str(err))
    written = answer.get("status", {}).get("devices") or []
    own = sum(1 for d in written if d.get("driver") == driver)
    typer.echo(
        f"{namespace}/{name}: status.devices holds {counted(own, 'entry', 'entries')} of {driver} "
        f"({len(written)} in all)"
    )


def _status_entries(file: str) -> list[Any]:
    """The entries of `--file`: `{"devices": [...]}` or the list itself, JSON or YAML."""
    from kubedevice.resource.document_file import ManifestError, load_documents, read_document_file

    where = "standard input" if file == "-" else file
    try:
        content = sys.stdin.buffer.read() if file == "-" else read_document_file(file)
        documents = load_documents(file, content)
    except OSError as err:
        fail(f"cannot read {where}: {err.strerror or err} — give the file of the entries")
    except ManifestError as err:
        fail(f"{where}: {err} — give the entries as JSON or YAML")
    if len(documents) != 1:
        fail(
            f'{where}: {len(documents)} documents — give one: {{"devices": [...]}} or the list '
            '(`{"devices": []}` removes the driver\'s entries)'
        )
    entries = documents[0]
    if isinstance(entries, dict) and set(entries) <= {"devices"}:
        entries = entries.get("devices") or []
    if not isinstance(entries, list):
        fail(f'{where}: not {{"devices": [...]}} nor a list of entries — give the entries of status.devices')
    return entries


def register(app: typer.Typer) -> None:
    """Add `status`, `pods` and `claims` (with `claims set-status`) to the `kubedevice` command."""
    app.command("status")(status)
    app.command("pods")(pods)
    app.add_typer(claims_app, name="claims")
