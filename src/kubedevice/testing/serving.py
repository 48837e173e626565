"""A DevicePlugin served by the SDK's own server in the test's event loop, against a plugin folder.

The fixtures keep what they start and stop it at teardown, so a test never leaves a plugin behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from kubedevice.plugin import ConfigError, DevicePlugin, PluginServer


class ServedPlugin:
    """One running PluginServer and the task that runs it; `failure()` says why it stopped on its own."""

    def __init__(self, server: PluginServer, task: asyncio.Task[None]) -> None:
        self.server = server
        self.task = task
        self._stopping = False

    def failure(self) -> str | None:
        """One line when the server ended without being asked to (it crashed or its lifecycle ended)."""
        if self._stopping or not self.task.done():
            return None
        if self.task.cancelled():
            return f"the plugin server of {self.server.resource} was cancelled"
        error = self.task.exception()
        if error is None:
            return f"the plugin server of {self.server.resource} stopped on its own"
        return f"the plugin server of {self.server.resource} failed: {type(error).__name__}: {error}"

    async def stop(self) -> None:
        """Stop serving (sockets removed); an error the server ended with is not raised again here."""
        self._stopping = True
        self.server.request_stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await self.task
        await self.server.stop()


async def serve_plugin(plugin: DevicePlugin, plugin_dir: Path, **server_options: object) -> ServedPlugin:
    """Start serving `plugin` in `plugin_dir`; `server_options` are PluginServer's keyword arguments."""
    __tracebackhide__ = True
    try:
        server = PluginServer(plugin, str(plugin_dir), **server_options)  # type: ignore[arg-type]
    except (ConfigError, TypeError) as err:
        raise AssertionError(f"cannot serve {type(plugin).__name__}: {err}") from None
    # Started here, so an error starting it fails the call that asked for it; run() then serves until stopped.
    try:
        await server.start()
    except (ConfigError, OSError) as err:
        await server.stop()
        raise AssertionError(f"cannot serve {type(plugin).__name__}: {err}") from None
    task = asyncio.get_running_loop().create_task(server.run(), name=f"serve {server.resource}")
    return ServedPlugin(server, task)
