"""One conformance run: a temporary plugin dir, a stand-in kubelet, the plugin process, the checks in order.

The kubelet-restart checks (7 and 8) live here because they drive the stand-in kubelet and watch the process.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubedevice.api.constants import DIAL_TIMEOUT_S, KUBELET_SOCKET_NAME
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.conformance.checks import (
    ALLOCATE,
    CHECK_NAMES,
    KUBELET_ABSENCE,
    KUBELET_RESTART,
    LIST_AND_WATCH,
    OPTIONS,
    PLUGIN_PROCESS,
    PRE_START,
    PREFERRED_ALLOCATION,
    REGISTRATION,
    TOPOLOGY,
    ListAndWatchFeed,
    healthy_ids,
    list_and_watch_check,
    options_check,
    registration_check,
    stream_kept_open,
)
from kubedevice.conformance.dra_checks import DRA_CHECK_NAMES
from kubedevice.conformance.dra_kubelet import DRAKubelet, DRARegistration
from kubedevice.conformance.dra_run import DRARun
from kubedevice.conformance.kubelet import FakeKubelet, RegistrationAttempt, has_socket
from kubedevice.conformance.plugin_call_checks import (
    allocate_check,
    pre_start_check,
    preferred_allocation_check,
)
from kubedevice.conformance.process import (
    PluginLauncher,
    PluginProcess,
    PluginRun,
    exit_note,
    process_row,
)
from kubedevice.conformance.report import CheckResult, Findings, Report, not_run, skipped
from kubedevice.conformance.topology_check import topology_check
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIRS
from kubedevice.topology import read_topology

_STOPPING = "stopping"


class CommandError(Exception):
    """The plugin command cannot be started at all (a usage error, not a conformance failure)."""


@dataclass(frozen=True)
class ConformanceOptions:
    """What to run and how patient to be; `timeout_s` bounds every wait for the plugin."""

    command: tuple[str, ...]
    timeout_s: float = 10.0
    restarts: int = 3
    #: How long kubelet.sock stays away in check 8.
    absence_s: float = 3.0
    #: How long the plugin gets between SIGTERM and SIGKILL at the end.
    stop_grace_s: float = 5.0
    #: The node's NUMA node IDs for the topology check; None reads them from sysfs.
    numa_nodes: tuple[int, ...] | None = None
    #: Where the CDI names of Allocate and prepare answers must be defined; None: the runtimes' folders,
    #: and the checker's kubelet folder's `cdi/` once there is one (where the SDK writes beside a kubelet
    #: folder that is not /var/lib/kubelet).
    cdi_spec_dirs: tuple[Path, ...] | None = None


async def run_conformance(options: ConformanceOptions, launch: PluginLauncher | None = None) -> Report:
    """Run every check against `options.command` and return the report; cleans up whatever happens.

    `launch(plugin_dir, log_path)` runs the plugin some other way than as the command's process (the
    pytest kit runs a DevicePlugin object in the caller's event loop). Raises CommandError when the command
    cannot be executed.
    """
    # Short and under /tmp: unix socket paths are limited to 107 bytes.
    root = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="kdc-", dir="/tmp"))
    try:
        plugin_dir = root / "dp"
        await asyncio.to_thread(os.mkdir, plugin_dir, 0o750)
        return await _Run(options, plugin_dir, root / "plugin.log", launch, root).execute()
    finally:
        await asyncio.to_thread(shutil.rmtree, root, True)


class _Run:
    def __init__(
        self,
        options: ConformanceOptions,
        plugin_dir: Path,
        log_path: Path,
        launch: PluginLauncher | None,
        kubelet_dir: Path,
    ) -> None:
        self.options = options
        self._kubelet_cdi = kubelet_dir / "cdi"
        self.timeout_s = options.timeout_s
        self.kubelet = FakeKubelet(plugin_dir, min(DIAL_TIMEOUT_S, options.timeout_s))
        self.dra = DRAKubelet(kubelet_dir, options.timeout_s)
        self.process: PluginRun = (
            launch(plugin_dir, log_path)
            if launch is not None
            else PluginProcess(options.command, plugin_dir, log_path, kubelet_dir)
        )
        self.loop = asyncio.get_running_loop()
        #: A registration of the other API that came with the first one, kept for its checks.
        self._held_attempt: RegistrationAttempt | None = None
        self._held_dra: DRARegistration | None = None

    async def execute(self) -> Report:
        rows: dict[str, CheckResult] = {}
        show_log = False
        await self.kubelet.start()
        await self.dra.start()
        try:
            try:
                await self.process.start()
            except OSError as err:
                raise CommandError(f"cannot run {self.options.command[0]!r}: {err.strerror or err}") from err
            show_log = await self._checks(rows)
        finally:
            self.process.phase = _STOPPING
            # Our connections go first, so the plugin's shutdown does not abort calls we still hold open.
            await self.kubelet.stop()
            await self.dra.stop()
            await self.process.stop(self.options.stop_grace_s)
        rows[PLUGIN_PROCESS] = self._process_row()
        log_tail = await asyncio.to_thread(self.process.log_tail) if show_log else []
        order = (*CHECK_NAMES[:-1], *DRA_CHECK_NAMES, PLUGIN_PROCESS)
        return Report(tuple(rows[name] for name in order if name in rows), tuple(log_tail))

    # -- the checks, in the order the kubelet would meet the plugin --------------------------------------

    async def _checks(self, rows: dict[str, CheckResult]) -> bool:
        """Fill `rows`; True when the plugin's log should be shown (it never registered).

        What registered first decides: a device plugin on kubelet.sock, a DRA driver in plugins_registry;
        then the other API's registration is taken if it came, or waited for while its socket is served.
        """
        self.process.phase = "registration"
        started = self.loop.time()
        first = await self._first_registration(started + self.timeout_s)
        if isinstance(first, DRARegistration):
            rows.update(await self._dra_run().execute(first, first.received_at - started))
            held = self._held_attempt or next(iter(self.kubelet.forget_attempts()), None)
            if held is None and await asyncio.to_thread(
                has_socket, self.kubelet.plugin_dir, {KUBELET_SOCKET_NAME}
            ):
                # A device plugin socket is served: its Register call is on its way.
                held = await self._next_attempt(self.loop.time() + self.timeout_s)
            if held is None:
                return not first.accepted
            return await self._device_plugin_checks(rows, held, held.received_at - started)
        show_log = await self._device_plugin_checks(
            rows, first, (first.received_at if first else self.loop.time()) - started
        )
        dra = self._held_dra or self._pending_dra()
        if dra is None and await asyncio.to_thread(has_socket, self.dra.registry_dir, set()):
            # A registration socket is served in plugins_registry: the watcher is still on its way to it.
            dra = await self.dra.next_registration(self.timeout_s)
        if dra is not None:
            rows.update(await self._dra_run().execute(dra, dra.received_at - started))
        return show_log

    def cdi_spec_dirs(self) -> tuple[Path, ...]:
        """The folders CDI names are looked up in, as a check runs (the plugin has written by then)."""
        if self.options.cdi_spec_dirs is not None:
            return self.options.cdi_spec_dirs
        return (*DEFAULT_SPEC_DIRS, *((self._kubelet_cdi,) if self._kubelet_cdi.is_dir() else ()))

    def _dra_run(self) -> DRARun:
        def set_phase(phase: str) -> None:
            self.process.phase = phase

        return DRARun(self.dra, self.timeout_s, self.cdi_spec_dirs, self._exit_note, set_phase)

    def _pending_dra(self) -> DRARegistration | None:
        seen = self.dra.forget_registrations()
        return next((r for r in seen if r.accepted), seen[0] if seen else None)

    async def _first_registration(self, deadline: float) -> RegistrationAttempt | DRARegistration | None:
        """The first registration of either API before `deadline`; None on timeout or once the plugin exits.

        A registration of the other API that came at the same moment is held for its own checks.
        """
        waits: list[asyncio.Task[object]] = [
            asyncio.create_task(self.kubelet.next_attempt(deadline - self.loop.time())),
            asyncio.create_task(self.dra.next_registration(deadline - self.loop.time())),
            asyncio.create_task(self.process.exited.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            # Said before anything else runs: many plugins exit on a refusal, and the process row
            # names the phase they exited in.
            if any(not getattr(w.result(), "accepted", True) for w in waits[:2] if w.done()):
                self.process.phase = "registration (refused)"
        finally:
            for wait in waits:
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        results = [w.result() for w in waits[:2] if not w.cancelled() and w.result() is not None]
        if not results:
            # A call that raced the exit still counts.
            pending = self.kubelet.forget_attempts()
            if pending:
                return pending[0]
            return self._pending_dra()
        results.sort(key=lambda r: r.received_at)  # type: ignore[attr-defined]
        for other in results[1:]:
            if isinstance(other, DRARegistration):
                self._held_dra = other
            elif isinstance(other, RegistrationAttempt):
                self._held_attempt = other
        first = results[0]
        assert isinstance(first, (RegistrationAttempt, DRARegistration))
        return first

    async def _device_plugin_checks(
        self, rows: dict[str, CheckResult], attempt: RegistrationAttempt | None, waited: float
    ) -> bool:
        rows[REGISTRATION] = registration_check(
            attempt, waited, self.timeout_s, self.kubelet.socket_path, self._exit_note()
        )
        if attempt is None or not attempt.accepted or attempt.channel is None or attempt.options is None:
            why = "the plugin did not register" if attempt is None else "the registration was refused"
            if attempt is not None:
                # Many plugins exit on a refusal; give them a moment so the process row says so.
                self.process.phase = "registration (refused)"
                await self.process.wait_exit(min(1.0, self.timeout_s))
            for name in (OPTIONS, LIST_AND_WATCH, ALLOCATE, PREFERRED_ALLOCATION, PRE_START, TOPOLOGY):
                rows[name] = not_run(name, why)
            rows[KUBELET_RESTART] = not_run(KUBELET_RESTART, why)
            rows[KUBELET_ABSENCE] = not_run(KUBELET_ABSENCE, why)
            return True

        self.process.phase = "device checks"
        stub = dp_grpc.DevicePluginStub(attempt.channel)
        feed = ListAndWatchFeed(stub)
        feed.start()
        list_findings = await list_and_watch_check(feed, self.timeout_s)
        healthy = healthy_ids(feed.first)
        rows[ALLOCATE] = await allocate_check(stub, healthy, self.timeout_s, self.cdi_spec_dirs())
        rows[PREFERRED_ALLOCATION], preferred = await preferred_allocation_check(
            stub, attempt.options, healthy, self.timeout_s
        )
        rows[PRE_START], pre_start = await pre_start_check(stub, attempt.options, healthy, self.timeout_s)
        rows[OPTIONS] = options_check(attempt.request.options, attempt.options, preferred, pre_start)
        rows[TOPOLOGY] = await topology_check(
            stub, attempt.options, feed.first, await self._numa_nodes(), self.timeout_s
        )
        rows[LIST_AND_WATCH] = stream_kept_open(feed, list_findings)
        await feed.close()

        resource = attempt.request.resource_name
        restart_row, recovered = await self._kubelet_restarts(resource)
        rows[KUBELET_RESTART] = restart_row
        if recovered:
            rows[KUBELET_ABSENCE] = await self._kubelet_absence(resource)
        else:
            rows[KUBELET_ABSENCE] = not_run(
                KUBELET_ABSENCE, "the plugin did not come back after a kubelet restart"
            )
        return False

    async def _numa_nodes(self) -> tuple[int, ...]:
        if self.options.numa_nodes is not None:
            return self.options.numa_nodes
        machine = await asyncio.to_thread(read_topology)
        return tuple(n.id for n in machine.nodes)

    async def _kubelet_restarts(self, resource: str) -> tuple[CheckResult, bool]:
        """Check 7: recreate kubelet.sock the way a starting kubelet does; the plugin must register again."""
        count = self.options.restarts
        if count <= 0:
            return skipped(KUBELET_RESTART, "not run: --restarts 0"), True
        findings = Findings(KUBELET_RESTART)
        latencies: list[float] = []
        for number in range(1, count + 1):
            self.process.phase = f"kubelet restart {number}"
            if self.process.exited.is_set():
                findings.fail(f"restart {number}/{count}: the plugin {self._exit_note()}")
                return findings.result(), False
            self.kubelet.forget_attempts()
            created = await self.kubelet.restart()
            problem, latency = await self._await_return(
                resource, created, f"restart {number}/{count}", findings
            )
            if problem is not None:
                findings.fail(problem)
                return findings.result(), False
            latencies.append(latency)
        findings.note(
            f"re-registered {count}/{count} times; median {statistics.median(latencies) * 1000:.0f} ms, "
            f"max {max(latencies) * 1000:.0f} ms after kubelet.sock was created again"
        )
        return findings.result(), True

    async def _kubelet_absence(self, resource: str) -> CheckResult:
        """Check 8: kubelet.sock gone for a while; the plugin must wait for it, not die, and come back."""
        findings = Findings(KUBELET_ABSENCE)
        self.process.phase = "kubelet absent"
        absence = self.options.absence_s
        await self.kubelet.stop()
        # The absence itself is the scenario: the wait ends early only if the plugin dies meanwhile.
        if await self.process.wait_exit(absence):
            findings.fail(
                f"the plugin {self._exit_note()} while kubelet.sock was absent: "
                "keep running and wait for it to return"
            )
            return findings.result()
        self.process.phase = "kubelet back"
        self.kubelet.forget_attempts()
        await self.kubelet.clean_plugin_dir()
        created = await self.kubelet.start()
        problem, latency = await self._await_return(resource, created, f"after {absence:g} s away", findings)
        if problem is not None:
            findings.fail(problem)
        else:
            findings.note(
                f"survived {absence:g} s without kubelet.sock; re-registered {latency * 1000:.0f} ms after"
            )
        return findings.result()

    async def _await_return(
        self, resource: str, created: float, label: str, findings: Findings
    ) -> tuple[str | None, float]:
        """Wait for a re-registration and a non-empty device list on it; (problem, latency)."""
        deadline = created + self.timeout_s
        while True:
            attempt = await self._next_attempt(deadline)
            if attempt is None:
                exit_note = self._exit_note()
                if exit_note is not None:
                    return f"{label}: the plugin {exit_note}", 0.0
                return (
                    f"{label}: no registration within {self.timeout_s:g} s "
                    "after kubelet.sock was created again "
                    "(watch the plugin directory and register again when kubelet.sock is created)",
                    0.0,
                )
            if attempt.accepted:
                break
            findings.warn(f"{label}: a registration was refused first ({attempt.message})")
        latency = attempt.received_at - created
        if attempt.request.resource_name != resource:
            return f'{label}: registered "{attempt.request.resource_name}" instead of "{resource}"', latency
        assert attempt.channel is not None  # accepted attempts carry their connection
        feed = ListAndWatchFeed(dp_grpc.DevicePluginStub(attempt.channel))
        feed.start()
        try:
            if not await feed.wait_first(max(deadline - self.loop.time(), 1.0)):
                why = f" ({feed.error})" if feed.error else ""
                return (
                    f"{label}: registered again but sent no device list: capacity would stay 0{why}",
                    latency,
                )
            assert feed.first is not None
            if not feed.first.devices:
                return f"{label}: registered again with an empty device list: capacity would stay 0", latency
        finally:
            await feed.close()
        return None, latency

    async def _next_attempt(self, deadline: float) -> RegistrationAttempt | None:
        """The next Register call before `deadline`; None on timeout or as soon as the plugin exits."""
        next_call = asyncio.create_task(self.kubelet.next_attempt(deadline - self.loop.time()))
        exited = asyncio.create_task(self.process.exited.wait())
        try:
            await asyncio.wait((next_call, exited), return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
        if next_call.done():
            return next_call.result()
        next_call.cancel()
        # A call that raced the exit still counts.
        pending = self.kubelet.forget_attempts()
        return pending[0] if pending else None

    def _exit_note(self) -> str | None:
        return exit_note(self.process)

    def _process_row(self) -> CheckResult:
        return process_row(self.process, PLUGIN_PROCESS, _STOPPING, self.options.stop_grace_s)


def command_problem(command: Sequence[str]) -> str | None:
    """Why `command` cannot be run, checked before anything starts, or None."""
    if not command:
        return "no plugin command given (usage: kubedevice conformance [OPTIONS] -- COMMAND [ARGS...])"
    if shutil.which(command[0]) is None:
        return f"command not found: {command[0]}"
    return None
