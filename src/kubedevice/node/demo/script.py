"""The demo's script machinery: the temporary node (its daemon and plugins as processes of this
interpreter), what a story says, and the waits on the status API that every step of a story is.

Every wait has a deadline and fails with one clear line (DemoError) when its condition is not met.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, BinaryIO

from rich.console import Console

from kubedevice.statusapi import contract
from kubedevice.statusapi.client import StatusClient, StatusClientError
from kubedevice.statusapi.paths import NodePaths
from kubedevice.statusapi.tables import print_claims, print_node, print_pods

STEP_DEADLINE_S = 15.0
_POLL_S = 0.1
#: `kubedevice ARGS` as this interpreter runs it (no script on PATH needed).
_CLI = ("-c", "from kubedevice.cli import run; run()")
#: The demo's machine: two NUMA nodes.
NUMA = ("--numa-nodes", "2")


class DemoError(Exception):
    """A step of the demo did not reach its condition; str() is the one line to print."""


class Demo:
    """The demo's node under `root`: the daemon, the plugins and drivers, and the files they log to."""

    def __init__(self, root: Path, console: Console) -> None:
        self.root = root
        self.paths = NodePaths.under(root)
        self.console = console
        self.daemon: asyncio.subprocess.Process | None = None
        #: Every plugin and driver started, by resource or driver name: killed by cleanup.
        self.plugins: dict[str, asyncio.subprocess.Process] = {}
        self._logs: list[BinaryIO] = []
        self._status = StatusClient(self.paths.status_socket, wait=2.0)

    def say(self, text: str) -> None:
        self.console.print(f"\n[bold]==>[/bold] {text}", highlight=False, soft_wrap=True)

    async def log_file(self, name: str) -> BinaryIO:
        """`root/name`, opened for a process to append to; closed by cleanup, once the process has ended."""
        log = await asyncio.to_thread(open, self.root / name, "ab")
        self._logs.append(log)
        return log

    async def spawn(self, *args: str, stdout: BinaryIO, stderr: BinaryIO) -> asyncio.subprocess.Process:
        """`kubedevice ARGS` as a process."""
        return await asyncio.create_subprocess_exec(
            sys.executable, *_CLI, *args, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr
        )

    async def start(self, name: str, *args: str) -> asyncio.subprocess.Process:
        """`kubedevice ARGS`, its output and errors in `root/<name>.log`."""
        log = await self.log_file(f"{name}.log")
        return await self.spawn(*args, stdout=log, stderr=log)

    async def start_daemon(self, policy: str = "single-numa-node") -> None:
        self.daemon = await self.start(
            "daemon",
            "node",
            "--root-dir",
            str(self.root),
            "--stop-grace-period",
            "2s",
            *NUMA,
            "--topology-manager-policy",
            policy,
        )
        await self.until("the node daemon answers", lambda: self.node_has(lambda d: True))

    async def restart_daemon(self, policy: str = "single-numa-node") -> None:
        """The kubelet's restart: SIGKILL, then the daemon starts again on the same root."""
        assert self.daemon is not None
        self.daemon.send_signal(signal.SIGKILL)
        await self.daemon.wait()
        await self.start_daemon(policy)

    async def kill(self, process: asyncio.subprocess.Process | None) -> None:
        if process is None or process.returncode is not None:
            return
        process.kill()
        await process.wait()

    async def status(self, path: str) -> Any:
        return await self._status.get_json(path)

    async def node_has(self, predicate: Callable[[dict[str, Any]], bool]) -> bool:
        try:
            return predicate(await self.status(contract.NODE))
        except StatusClientError:
            return False

    async def pods_have(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> bool:
        try:
            return predicate((await self.status(contract.PODS))["pods"])
        except StatusClientError:
            return False

    async def pod_is(
        self, name: str, phase: str, also: Callable[[dict[str, Any]], bool] = lambda _pod: True
    ) -> bool:
        """Whether pod `name` is in `phase` (and `also` holds for it)."""
        return await self.pods_have(
            lambda pods: any(p.get("name") == name and p.get("phase") == phase and also(p) for p in pods)
        )

    async def until(self, what: str, condition: Callable[[], Awaitable[bool]]) -> None:
        deadline = time.monotonic() + STEP_DEADLINE_S
        while not await condition():
            if self.daemon is not None and self.daemon.returncode is not None:
                raise DemoError(
                    f"the node daemon exited with code {self.daemon.returncode} while waiting: {what}"
                )
            if time.monotonic() > deadline:
                raise DemoError(f"timed out after {STEP_DEADLINE_S:g}s waiting: {what}")
            await asyncio.sleep(_POLL_S)
        self.console.print(f"    ok: {what}", highlight=False, soft_wrap=True)

    async def show(self, *, node: bool = False, pods: bool = False, claims: bool = False) -> None:
        """The tables a story is about, each at most once per story: the output stays a story."""
        if node:
            print_node(self.console, await self.status(contract.NODE))
        if pods:
            print_pods(self.console, await self.status(contract.PODS))
        if claims:
            print_claims(self.console, await self.status(contract.CLAIMS))

    async def cleanup(self) -> None:
        for process in [*self.plugins.values(), self.daemon]:
            await self.kill(process)
        for log in self._logs:
            log.close()

    def tail_logs(self) -> None:
        for log_path in sorted(self.root.glob("*.log")):
            lines = log_path.read_text(errors="replace").splitlines()[-8:]
            if lines:
                self.console.print(f"--- last lines of {log_path.name}", highlight=False, soft_wrap=True)
                for line in lines:
                    self.console.print(line, highlight=False, markup=False)
