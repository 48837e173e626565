"""`kubedevice claims`: the node daemon's ResourceClaims, from its status API's `/claims`.

Like `status` and `pods`: asyncio and the status API only, rich imported only to print the table.
"""

from __future__ import annotations

import asyncio
import json

import typer

from kubedevice.console import make_console
from kubedevice.options import ROOT_HELP, fail, root_option
from kubedevice.statusapi.http import StatusClientError, get
from kubedevice.statusapi.paths import NodePaths


def claims(
    # Text, not Path: typer would turn "" into ".", the current folder.
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
    as_json: bool = typer.Option(False, "--json", help="Print the daemon's JSON answer (/claims)."),
) -> None:
    """The node's ResourceClaims: allocation, reservation, prepared or not, CDI devices, pods."""
    paths = NodePaths.under(root_option(root_dir))
    try:
        body = asyncio.run(get(paths.status_socket, "/claims"))
    except StatusClientError as err:
        fail(str(err))
    data = json.loads(body)
    if as_json:
        typer.echo(json.dumps(data, indent=1))
        return
    from kubedevice.statusapi.claim_tables import print_claims

    print_claims(make_console(), data)


def register(app: typer.Typer) -> None:
    """Add `claims` to the `kubedevice` command."""
    app.command("claims")(claims)
