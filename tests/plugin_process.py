"""Runs `kubedevice plugin ...` as a real subprocess and reads its one-line-per-event stdout."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")
DEADLINE_S = 20.0


class PluginProcess:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = [KUBEDEVICE, "plugin", *args]
        self.env = {**os.environ, **(env or {})}
        self.lines: list[str] = []
        self.stderr_lines: list[str] = []
        self._process: asyncio.subprocess.Process | None = None
        self._stderr_reader: asyncio.Task[None] | None = None

    @property
    def process(self) -> asyncio.subprocess.Process:
        assert self._process is not None, "not started"
        return self._process

    async def start(self) -> PluginProcess:
        self._process = await asyncio.create_subprocess_exec(
            *self.args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        # Drained all along, so chatty logs never fill the pipe and stall the plugin.
        self._stderr_reader = asyncio.create_task(self._read_stderr())
        return self

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            self.stderr_lines.append(raw.decode().rstrip("\n"))

    async def expect_stderr(self, text: str, deadline_s: float = DEADLINE_S) -> str:
        """Wait until a stderr line containing `text` has been logged."""
        deadline = asyncio.get_running_loop().time() + deadline_s
        while True:
            found = [line for line in self.stderr_lines if text in line]
            if found:
                return found[0]
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"no stderr line with {text!r} within {deadline_s}s: {self.stderr_lines}"
                )
            await asyncio.sleep(0.01)

    async def expect(self, prefix: str, deadline_s: float = DEADLINE_S) -> str:
        """Read stdout until a line starting with `prefix` arrives (the line is returned)."""
        assert self.process.stdout is not None
        try:
            async with asyncio.timeout(deadline_s):
                while True:
                    raw = await self.process.stdout.readline()
                    if not raw:
                        await self.process.wait()
                        stderr = "\n".join(self.stderr_lines)
                        raise AssertionError(f"plugin exited before {prefix!r}; stderr:\n{stderr}")
                    line = raw.decode().rstrip("\n")
                    self.lines.append(line)
                    if line.startswith(prefix):
                        return line
        except TimeoutError:
            raise AssertionError(f"no {prefix!r} line within {deadline_s}s; saw {self.lines}") from None

    async def terminate(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        """Send `sig`, wait for exit; return the exit code, the rest of stdout, and stderr."""
        self.process.send_signal(sig)
        async with asyncio.timeout(DEADLINE_S):
            assert self.process.stdout is not None
            out = await self.process.stdout.read()
            await self.process.wait()
            if self._stderr_reader is not None:
                await self._stderr_reader
        rest = out.decode().splitlines()
        self.lines.extend(rest)
        assert self.process.returncode is not None
        return self.process.returncode, "\n".join(rest), "\n".join(self.stderr_lines)

    async def kill(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()
        if self._stderr_reader is not None:
            await self._stderr_reader

    async def __aenter__(self) -> PluginProcess:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.kill()


def fields(line: str) -> dict[str, str]:
    """The key=value fields of an event line."""
    return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
