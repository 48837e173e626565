"""The `kubedevice` command: one entry point, a sub-command per tool."""

from __future__ import annotations

import typer

from kubedevice import __version__
from kubedevice.checkpoint_cli import app as checkpoint_app
from kubedevice.conformance.command import register as register_conformance
from kubedevice.node.cli import register as register_node_commands
from kubedevice.plugin.cli import app as plugin_app

app = typer.Typer(
    name="kubedevice",
    help="The Kubernetes device plugin framework: node daemon, plugin SDK and tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(checkpoint_app, name="checkpoint")
app.add_typer(plugin_app, name="plugin")
register_node_commands(app)
register_conformance(app)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kubedevice {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """The Kubernetes device plugin framework: node daemon, plugin SDK and tools."""


def run() -> None:
    """Console-script entry point."""
    app()
