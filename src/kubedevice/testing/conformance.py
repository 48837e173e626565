"""`run_conformance()` for tests: the conformance checker on a plugin command or a DevicePlugin object.

A command runs as its own process, as `kubedevice conformance` runs it; a DevicePlugin object is served by
the SDK in the test's event loop, so a test can check the plugin class it is developing without a script.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubedevice.conformance import CheckResult, CommandError, ConformanceOptions, Report, Result
from kubedevice.conformance import run_conformance as run_checks
from kubedevice.conformance.process import PluginRun, wait_set
from kubedevice.conformance.runner import command_problem
from kubedevice.plugin import DevicePlugin, LifecycleEvent, PluginServer
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIRS
from kubedevice.plugin.dra.runner import FacesServer, default_api
from kubedevice.testing.serving import ServedPlugin, serve_dra_driver, serve_plugin


@dataclass(frozen=True)
class ConformanceReport:
    """The checker's rows for one run; `assert_passed()` fails the test with one line per FAIL."""

    report: Report

    @property
    def passed(self) -> bool:
        return self.report.passed

    @property
    def checks(self) -> tuple[CheckResult, ...]:
        return self.report.checks

    def result(self, check: str) -> Result:
        """The verdict of one check by name (registration, allocate, kubelet-restart...)."""
        for row in self.report.checks:
            if row.name == check:
                return row.result
        raise KeyError(f"no check named {check!r}; checks: {', '.join(r.name for r in self.report.checks)}")

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(row for row in self.report.checks if row.result is Result.FAIL)

    def assert_passed(self) -> None:
        __tracebackhide__ = True
        failures = self.failures
        if not failures:
            return
        lines = [f"plugin conformance: {len(failures)} of {len(self.report.checks)} checks failed"]
        lines.extend(f"FAIL {row.name}: {row.detail}" for row in failures)
        if self.report.log_tail:
            lines.append(f"plugin log ends with: {self.report.log_tail[-1]}")
        raise AssertionError("\n".join(lines))

    def __str__(self) -> str:
        return "\n".join(f"{row.result.value:4} {row.name}: {row.detail}" for row in self.report.checks)


async def run_conformance(
    command_or_plugin: str | Sequence[str] | DevicePlugin,
    *,
    restarts: int = 3,
    timeout: float = 10.0,
    absence: float = 3.0,
    numa_nodes: Sequence[int] | None = None,
    cdi_spec_dirs: Sequence[str | Path] | None = None,
) -> ConformanceReport:
    """Every conformance check against a plugin; the same checks and defaults as `kubedevice conformance`.

    A command (a string is split like a shell would, or an argument list) gets `{plugin_dir}` in its
    arguments and $KUBEDEVICE_PLUGIN_DIR set to the checker's folder. `restarts` kubelet restarts are
    made; `absence` is how long kubelet.sock stays away in the last check; `numa_nodes` are the node's
    NUMA node IDs for the topology check (default: this machine's). `cdi_spec_dirs` are the folders whose
    CDI specs must define every CDI name an Allocate answers (default: the runtimes' /etc/cdi and
    /var/run/cdi, plus where the SDK writes a DevicePlugin object's specs: its own `cdi_spec_dir`, else
    the checker's kubelet folder's `cdi/`).
    """
    __tracebackhide__ = True
    launch = None
    spec_dirs = tuple(Path(d) for d in cdi_spec_dirs) if cdi_spec_dirs is not None else None
    if isinstance(command_or_plugin, DevicePlugin):
        plugin = command_or_plugin
        own = plugin.cdi_spec_dir
        if spec_dirs is None and own is not None:
            spec_dirs = (
                DEFAULT_SPEC_DIRS if Path(own) in DEFAULT_SPEC_DIRS else (*DEFAULT_SPEC_DIRS, Path(own))
            )
        command: tuple[str, ...] = (type(plugin).__name__,)

        def launch(plugin_dir: Path, log_path: Path) -> PluginRun:
            return InProcessPlugin(plugin, plugin_dir)

    else:
        command = tuple(
            shlex.split(command_or_plugin) if isinstance(command_or_plugin, str) else command_or_plugin
        )
        problem = command_problem(command)
        if problem is not None:
            raise AssertionError(f"run_conformance: {problem}")
    options = ConformanceOptions(
        command=command,
        timeout_s=timeout,
        restarts=restarts,
        absence_s=absence,
        numa_nodes=None if numa_nodes is None else tuple(numa_nodes),
        cdi_spec_dirs=spec_dirs,
    )
    try:
        return ConformanceReport(await run_checks(options, launch))
    except CommandError as err:
        raise AssertionError(f"run_conformance: {err}") from None


class InProcessPlugin:
    """A DevicePlugin served in this event loop, shaped like the checker's plugin process."""

    def __init__(self, plugin: DevicePlugin, plugin_dir: Path) -> None:
        self._plugin = plugin
        self._plugin_dir = plugin_dir
        self.exited = asyncio.Event()
        self.phase = "start-up"
        self.exit_phase: str | None = None
        self.killed = False
        self._served: ServedPlugin[PluginServer] | ServedPlugin[FacesServer] | None = None
        self._returncode: int | None = None
        self._log: list[str] = []

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def start(self) -> None:
        if default_api(self._plugin) == "dra":
            # The checker's kubelet folder: its plugin directory, plugins_registry/, the daemon's socket.
            self._served = await serve_dra_driver(
                self._plugin, self._plugin_dir.parent, on_event=self._on_event
            )
        else:
            self._served = await serve_plugin(self._plugin, self._plugin_dir, on_event=self._on_event)
        self._served.task.add_done_callback(self._ended)

    def _on_event(self, event: LifecycleEvent) -> None:
        self._log.append(event.line())

    def _ended(self, task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            self._log.append(f"{type(error).__name__}: {error}")
        self._returncode = 0 if error is None else 1
        self.exit_phase = self.phase
        self.exited.set()

    async def wait_exit(self, timeout_s: float) -> bool:
        return await wait_set(self.exited, timeout_s)

    async def stop(self, grace_s: float) -> None:
        if self._served is None:
            return
        try:
            await asyncio.wait_for(self._served.stop(), grace_s)
        except TimeoutError:
            self.killed = True
            self._served.task.cancel()
        await self.exited.wait()

    def log_tail(self, lines: int = 20) -> list[str]:
        return self._log[-lines:]
