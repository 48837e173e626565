"""The `kubedevice` command as a typer group whose sub-commands are imported only when they run.

`kubedevice.cli` (the console script's entry point) answers `--version` without it and hands every other
command line here; the tools are listed from their table (:mod:`kubedevice.tools`).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer._click.utils import make_default_short_help
from typer.core import TyperGroup

from kubedevice import __version__
from kubedevice.console import command_name, fail
from kubedevice.tools import DESCRIPTION, SUBCOMMANDS


def _commands_of(module_name: str, command: str) -> dict[str, Any]:
    module = importlib.import_module(module_name)
    holder = typer.Typer(rich_markup_mode=None)
    holder.callback()(lambda: None)  # a callback keeps a one-command app a group
    if hasattr(module, "register"):
        module.register(holder)
    else:
        holder.add_typer(module.app, name=command)
    group = typer.main.get_command(holder)
    assert isinstance(group, TyperGroup)
    _plain_metavars(group)
    return dict(group.commands)


#: Placeholders in help and usage lines: plain capitals, as in man pages, never `<path>` or `{path}`
#: (which reads like the conformance checker's `{plugin_dir}` token). Keys are click's type names.
_METAVARS = {"path": "PATH", "text": "TEXT", "str": "TEXT", "integer": "N", "int": "N", "float": "NUMBER"}


def _plain_metavars(command: Any) -> None:
    for param in getattr(command, "params", []):
        if param.param_type_name == "argument":
            # An argument is shown by its name (PATH, -- COMMAND [ARGS...]), in usage lines too.
            param.metavar = param.metavar or param.name.upper()
            if param.required and param.nargs == 1:
                param.make_metavar = lambda ctx=None, usage=False, name=param.metavar: name
            continue
        if getattr(param, "is_flag", False) or getattr(param, "metavar", None):
            continue
        choices = param.type.get_metavar(param, ctx=None)
        if choices:  # choices read best as they are: a|b
            param.metavar = choices.strip("[]")
        else:
            kind = param.type.name.split()[0]  # "integer range" is still an integer
            param.metavar = _METAVARS.get(kind, kind.upper())
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


class _LazyGroup(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(SUBCOMMANDS))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in SUBCOMMANDS and cmd_name not in self.commands:
            self.commands.update(_commands_of(SUBCOMMANDS[cmd_name].module, cmd_name))
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # Each tool's one line from the table, as click would shorten its help: listing the commands
        # imports none of them (the tests check the table against each tool's own help).
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, make_default_short_help(SUBCOMMANDS[name].summary, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: Any) -> Any:
        # Every usage error of every sub-command is one `error: ...` line on stderr with exit code 2,
        # not a usage box: scripts and the tests read stderr. `--help` and a bare group still show help.
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise
        except UsageError as err:
            command = err.ctx.command_path if err.ctx is not None else _attempted(ctx)
            _usage_error(command, err.format_message())


def _usage_error(command_path: str, message: str) -> NoReturn:
    """Every usage error of every command: one line, what was wrong and what to do, exit code 2."""
    fail(message.rstrip("."), command=command_name(command_path))


def _attempted(ctx: Any) -> str:
    """The command line's command path, when the error came before the sub-command had a context."""
    return " ".join(w for w in (ctx.command_path, ctx.invoked_subcommand) if w)


app = typer.Typer(
    rich_markup_mode=None,
    name="kubedevice",
    cls=_LazyGroup,
    help=DESCRIPTION,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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
    """Run the command line in sys.argv through the typer group."""
    command = typer.main.get_command(app)
    try:
        code = command.main(prog_name="kubedevice", standalone_mode=False)
    except NoArgsIsHelpError as err:
        typer.echo(err.format_message())
        sys.exit(2)
    except UsageError as err:
        # An unknown global option or command fails before any sub-command's context exists.
        try:
            _usage_error(err.ctx.command_path if err.ctx is not None else "kubedevice", err.format_message())
        except typer.Exit as exit_:
            sys.exit(exit_.exit_code)
    except typer.Abort:
        sys.exit(130)  # Ctrl-C
    sys.exit(code if isinstance(code, int) else 0)
