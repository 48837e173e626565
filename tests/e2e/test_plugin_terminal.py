"""`kubedevice plugin` on a terminal: each lifecycle event shows once, not as an event line on stdout and
again as a log line on stderr; in pipes (how tools read it) the log still says them."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from tests.plugin_kubelet import FakeKubelet, plugin_dir
from tests.plugin_process import KUBEDEVICE, PluginProcess

__all__ = ["plugin_dir"]

RESOURCE = "example.com/tty"


class Terminal:
    """A pseudo-terminal both stdout and stderr of a process write to, read on the event loop."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.output = bytearray()
        self.grew = asyncio.Event()

    def start_reading(self) -> None:
        asyncio.get_running_loop().add_reader(self.master, self._read)

    def _read(self) -> None:
        try:
            self.output += os.read(self.master, 65536)
            self.grew.set()
        except OSError:  # the process has gone and closed the terminal's last writer
            asyncio.get_running_loop().remove_reader(self.master)

    def lines(self) -> list[str]:
        return self.output.decode(errors="replace").splitlines()

    async def wait_for(self, text: str, deadline_s: float = 20.0) -> None:
        async with asyncio.timeout(deadline_s):
            while text not in self.output.decode(errors="replace"):
                self.grew.clear()
                await self.grew.wait()

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        os.close(self.master)


#: An SDK plugin's own script that logs at INFO, as an author debugging it would, then calls serve().
SDK_SCRIPT = f"""
import logging, sys
from kubedevice.plugin import serve
from kubedevice.plugin.builtin.fake import FakeConfig, FakePlugin
logging.basicConfig(level=logging.INFO)
serve(FakePlugin(FakeConfig("{RESOURCE}", 1)), sys.argv[1])
"""


def _command(kind: str, directory: str) -> tuple[str, ...]:
    if kind == "cli":
        return (
            KUBEDEVICE,
            "plugin",
            "fake",
            "--resource",
            RESOURCE,
            "--devices",
            "1",
            "--plugin-dir",
            directory,
        )
    return (sys.executable, "-c", SDK_SCRIPT, directory)


@pytest.mark.parametrize("kind", ["cli", "serve"])
async def test_each_lifecycle_event_shows_once_on_a_terminal(plugin_dir: str, kind: str) -> None:
    directory = os.path.join(plugin_dir, "device-plugins")  # missing at first: "waiting" is said too
    terminal = Terminal()
    process = await asyncio.create_subprocess_exec(
        *_command(kind, directory),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=terminal.slave,
        stderr=terminal.slave,
    )
    os.close(terminal.slave)
    terminal.start_reading()
    try:
        await terminal.wait_for("waiting resource=")
        os.mkdir(directory)
        async with FakeKubelet(directory) as kubelet:
            await kubelet.wait_registrations(1)
            await terminal.wait_for("registered resource=")
            process.send_signal(signal.SIGTERM)
            await terminal.wait_for("stopped resource=")
            async with asyncio.timeout(20):
                assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        terminal.close()
    lines = terminal.lines()
    for said in ("waiting", "registered"):
        mentions = [line for line in lines if said in line]
        assert len(mentions) == 1 and mentions[0].startswith(f"{said} resource={RESOURCE}"), lines


async def test_in_pipes_the_log_still_says_the_events(plugin_dir: str) -> None:
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess("fake", "--resource", RESOURCE, "--devices", "1", "--plugin-dir", plugin_dir) as plugin,
    ):
        await plugin.expect("registered ")
        await kubelet.wait_registrations(1)
        await plugin.expect_stderr(f"INFO kubedevice.plugin.server: registered {RESOURCE} with endpoint")
