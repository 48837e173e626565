"""The plugin under test as a child process: started with the plugin dir filled in, watched, and stopped."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from kubedevice.api.constants import PLUGIN_DIR_ENV
from kubedevice.conformance.report import CheckResult, Result
from kubedevice.plugin.dra.paths import KUBELET_DIR_ENV

#: Every `{plugin_dir}` in the command's arguments becomes the checker's temporary plugin directory.
PLUGIN_DIR_PLACEHOLDER = "{plugin_dir}"
#: Every `{kubelet_dir}` becomes the checker's temporary kubelet folder (a DRA driver's plugins_registry/,
#: plugins/ and the node daemon's socket are in it).
KUBELET_DIR_PLACEHOLDER = "{kubelet_dir}"
#: Removed from the plugin's environment: with it an SDK driver would publish to a real cluster.
CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"


def expand_command(command: Sequence[str], plugin_dir: Path, kubelet_dir: Path | None = None) -> list[str]:
    kubelet = str(kubelet_dir if kubelet_dir is not None else plugin_dir.parent)
    return [
        argument.replace(PLUGIN_DIR_PLACEHOLDER, str(plugin_dir)).replace(KUBELET_DIR_PLACEHOLDER, kubelet)
        for argument in command
    ]


class PluginRun(Protocol):
    """What the runner needs of the plugin under test: start it, watch it end, stop it, read its log."""

    exited: asyncio.Event
    phase: str
    exit_phase: str | None
    killed: bool

    @property
    def returncode(self) -> int | None: ...

    async def start(self) -> None: ...

    async def wait_exit(self, timeout_s: float) -> bool: ...

    async def stop(self, grace_s: float) -> None: ...

    def log_tail(self, lines: int = 20) -> list[str]: ...


async def wait_set(event: asyncio.Event, timeout_s: float) -> bool:
    """True when `event` is set within `timeout_s` (at once when it already is)."""
    try:
        await asyncio.wait_for(event.wait(), timeout=max(timeout_s, 0.0))
    except TimeoutError:
        return False
    return True


#: Makes the PluginRun for a plugin directory and a log file.
PluginLauncher = Callable[[Path, Path], PluginRun]


class PluginProcess:
    """One run of the plugin command, its output going to `log_path`.

    `exited` is set the moment the process ends; `phase` names what the checker was doing then, so the
    report can say when the plugin died.
    """

    def __init__(
        self, command: Sequence[str], plugin_dir: Path, log_path: Path, kubelet_dir: Path | None = None
    ) -> None:
        self._kubelet_dir = kubelet_dir if kubelet_dir is not None else plugin_dir.parent
        self._command = expand_command(command, plugin_dir, self._kubelet_dir)
        self._plugin_dir = plugin_dir
        self.log_path = log_path
        self.exited = asyncio.Event()
        self.phase = "start-up"
        self.exit_phase: str | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._watcher: asyncio.Task[None] | None = None
        #: Set when the process ignored SIGTERM for the whole grace period.
        self.killed = False

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    async def start(self) -> None:
        """Start the command; raises OSError when it cannot be executed."""
        env = {**os.environ, PLUGIN_DIR_ENV: str(self._plugin_dir), KUBELET_DIR_ENV: str(self._kubelet_dir)}
        env.pop(CLUSTER_ENV, None)
        log = await asyncio.to_thread(open, self.log_path, "ab")
        try:
            # A session of its own, so stopping it also reaches the children of a wrapper script.
            self._process = await asyncio.create_subprocess_exec(
                *self._command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        finally:
            log.close()
        self._watcher = asyncio.create_task(self._watch(self._process))

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        await process.wait()
        self.exit_phase = self.phase
        self.exited.set()

    async def wait_exit(self, timeout_s: float) -> bool:
        """True when the process ended within `timeout_s`."""
        return await wait_set(self.exited, timeout_s)

    async def stop(self, grace_s: float) -> None:
        """SIGTERM, then SIGKILL when it has not ended after `grace_s`. Safe to call when already stopped."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            self._signal(process.pid, signal.SIGTERM)
            if not await self.wait_exit(grace_s):
                self.killed = True
                self._signal(process.pid, signal.SIGKILL)
                await self.exited.wait()
        # Children it left behind in its session are ours to end too.
        self._signal(process.pid, signal.SIGKILL)
        if self._watcher is not None:
            await self._watcher

    @staticmethod
    def _signal(pid: int, signum: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)

    def log_tail(self, lines: int = 20) -> list[str]:
        """The last lines the plugin printed (blocking read of a small file: call from a thread)."""
        try:
            data = self.log_path.read_bytes()
        except FileNotFoundError:
            return []
        text = data[-64 * 1024 :].decode("utf-8", errors="replace")
        return text.splitlines()[-lines:]


def exit_note(run: PluginRun) -> str | None:
    """How the plugin ended ("exited with code 3"), or None while it runs."""
    if not run.exited.is_set():
        return None
    code = run.returncode
    if code is not None and code >= 0:
        return f"exited with code {code}"
    return f"exited ({describe_exit(code)})"


def process_row(run: PluginRun, name: str, stopping_phase: str, grace_s: float) -> CheckResult:
    """The report's last row: the plugin ran until stopped, or when it died, or that it had to be killed."""
    phase = run.exit_phase
    code = run.returncode
    if phase is not None and phase != stopping_phase:
        return CheckResult(name, Result.WARN, f"the plugin exited ({describe_exit(code)}) during {phase}")
    if run.killed:
        return CheckResult(
            name, Result.WARN, f"ignored SIGTERM for {grace_s:g} s and was killed: exit promptly on SIGTERM"
        )
    return CheckResult(name, Result.PASS, f"ran until stopped; {describe_exit(code)}")


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code == -signal.SIGTERM:
        return "ended by SIGTERM"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"
