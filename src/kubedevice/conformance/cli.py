"""`kubedevice conformance [OPTIONS] -- COMMAND [ARGS...]`: the CLI face of the checker."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer._click.core import Context
from typer._click.exceptions import UsageError
from typer.core import TyperCommand

from kubedevice.conformance.junit import to_junit_xml, write_junit_xml
from kubedevice.conformance.runner import CommandError, ConformanceOptions, command_problem, run_conformance
from kubedevice.console import fail, make_console

HELP = """Check a device plugin or DRA driver the way a kubelet would meet it, in seconds, without a cluster.

Starts a stand-in kubelet in a temporary kubelet folder, runs COMMAND with every {plugin_dir} in its
arguments replaced by its device plugin directory and every {kubelet_dir} by the folder itself
($KUBEDEVICE_PLUGIN_DIR and $KUBEDEVICE_KUBELET_DIR set to them), and checks what registered. A device
plugin: registration, options, ListAndWatch, Allocate, GetPreferredAllocation, PreStartContainer, NUMA
topology (against the node's NUMA nodes, or --numa-nodes N), kubelet restarts and a kubelet that is away
for a while. A DRA driver: registration through plugins_registry, its ResourceSlices against its health
stream, prepare, prepare again, CDI devices, unprepare, one bad claim among good ones and registration
after plugins_registry is made again (claims and the node name are served as the node daemon serves them).
 Exit code 0 when no check failed, 1 otherwise, 2 on usage errors.
"""


def _usage_error(message: str) -> NoReturn:
    fail(message, command="conformance")


class ConformanceCommand(TyperCommand):
    """Usage errors as one line on stderr instead of a usage box, so scripts can read them."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as exc:
            _usage_error(exc.format_message())


#: Options end at the plugin command: everything from COMMAND on belongs to the plugin, `--` or not.
CONTEXT_SETTINGS = {"allow_interspersed_args": False}


def conformance(
    timeout: float = typer.Option(
        10.0, "--timeout", metavar="S", help="Seconds to wait for each registration and each answer."
    ),
    restarts: int = typer.Option(3, "--restarts", metavar="N", help="How many kubelet restarts to simulate."),
    json_output: bool = typer.Option(False, "--json", help="Print the report as JSON instead of a table."),
    junit_xml: Path | None = typer.Option(
        None, "--junit-xml", help="Also write the report as JUnit XML (one test case per check) to this file."
    ),
    absence: float = typer.Option(
        3.0, "--absence", metavar="S", help="Seconds kubelet.sock stays away in the kubelet-absence check."
    ),
    numa_nodes: int | None = typer.Option(
        None,
        "--numa-nodes",
        metavar="N",
        help="The node has NUMA nodes 0..N-1 for the topology check [default: read from sysfs].",
    ),
    cdi_spec_dir: list[Path] | None = typer.Option(
        None,
        "--cdi-spec-dir",
        metavar="DIR",
        help="A folder of CDI specs defining the CDI devices Allocate names; repeat for several "
        "[default: /etc/cdi and /var/run/cdi, as the runtimes, and {kubelet_dir}/cdi once there is one].",
    ),
    command: list[str] | None = typer.Argument(None, metavar="-- COMMAND [ARGS...]", show_default=False),
) -> None:
    """Check a device plugin or a DRA driver the way a kubelet would meet it."""
    argv = tuple(command or ())
    if not math.isfinite(timeout) or timeout <= 0:
        _usage_error(f"--timeout must be a positive number of seconds, got {timeout:g}")
    if restarts < 0:
        _usage_error(f"--restarts must be 0 or more, got {restarts}")
    if not math.isfinite(absence) or absence < 0:
        _usage_error(f"--absence must be 0 or more seconds, got {absence:g}")
    if numa_nodes is not None and numa_nodes < 1:
        _usage_error(f"--numa-nodes must be 1 or more, got {numa_nodes}")
    spec_dirs = tuple(cdi_spec_dir) if cdi_spec_dir else None
    for folder in spec_dirs or ():
        if folder.exists() and not folder.is_dir():
            _usage_error(f"--cdi-spec-dir {folder} is a file — give the folder that holds the CDI specs")
    problem = command_problem(argv)
    if problem is not None:
        _usage_error(problem)
    options = ConformanceOptions(
        command=argv,
        timeout_s=timeout,
        restarts=restarts,
        absence_s=absence,
        numa_nodes=tuple(range(numa_nodes)) if numa_nodes is not None else None,
        cdi_spec_dirs=spec_dirs,
    )
    if junit_xml is not None and not junit_xml.absolute().parent.is_dir():
        _usage_error(f"--junit-xml {junit_xml}: its folder does not exist")
    # The stand-in kubelet's own warnings (a watched folder re-created on purpose) are not the plugin's.
    logging.getLogger("kubedevice").addHandler(logging.NullHandler())
    started = time.monotonic()
    try:
        report = asyncio.run(run_conformance(options))
    except CommandError as err:
        _usage_error(str(err))
    if junit_xml is not None:
        document = to_junit_xml(report, argv, time.monotonic() - started)
        try:
            write_junit_xml(junit_xml, document)
        except OSError as err:
            fail(f"--junit-xml {junit_xml}: {err.strerror or err} — give a writable file", code=1)
    if json_output:
        typer.echo(report.to_json())
    else:
        report.print_table(make_console())
    raise typer.Exit(0 if report.passed else 1)


def register(app: typer.Typer) -> None:
    """Add `conformance` to the root `kubedevice` command."""
    app.command("conformance", cls=ConformanceCommand, context_settings=CONTEXT_SETTINGS, help=HELP)(
        conformance
    )
