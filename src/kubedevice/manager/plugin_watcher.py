"""Plugin-watcher ("probe mode") registration through a plugins_registry directory.

The directory is watched (inotify, or polling every `interval` where inotify cannot be used) and scanned
again on every change and every RESCAN_S; a scan finds unix sockets; each new one is asked GetInfo, validated,
connected like a kubelet.sock registration (the endpoint used as is) and told the outcome. A socket that
disappears deregisters its plugin like a stream end. Hidden names (starting with ".") are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import grpc.aio

from kubedevice.api.constants import DEVICE_PLUGIN_TYPE, SUPPORTED_VERSIONS, VERSION
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.manager.endpoint import describe_rpc_error, dial
from kubedevice.manager.errors import PluginCallError, RegistrationError
from kubedevice.manager.registration import is_extended_resource_name
from kubedevice.watch import DirectoryWatch, Mask

if TYPE_CHECKING:
    from kubedevice.manager.endpoint_lifecycle import EndpointLifecycle, WatcherOptions

log = logging.getLogger(__name__)

#: A full look at the directory this often even when inotify reported nothing (events can be lost).
RESCAN_S = 10.0

#: (inode, device, ctime) of a socket file: a new socket at the same path is a new plugin.
_Identity = tuple[int, int, int]


@dataclass(slots=True)
class _Plugin:
    identity: _Identity
    task: asyncio.Task[None] | None = None
    #: (resource name, endpoint) once registered.
    registered: tuple[str, str] | None = None


def validate_plugin(name: str, versions: list[str]) -> None:
    """The device manager's ValidatePlugin, with its texts."""
    if not any(v in SUPPORTED_VERSIONS for v in versions):
        raise RegistrationError(
            f"manager version, {VERSION}, is not among plugin supported versions [{' '.join(versions)}]",
            invalid=True,
        )
    if not is_extended_resource_name(name):
        raise RegistrationError(
            f'invalid name of device plugin socket: the ResourceName "{name}" is invalid', invalid=True
        )


def _not_hidden(name: str, _mask: Mask) -> bool:
    return not name.startswith(".")


def _scan(directory: Path) -> dict[str, _Identity]:
    found: dict[str, _Identity] = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                found[path] = (st.st_ino, st.st_dev, st.st_ctime_ns)
    return found


class PluginWatcher:
    """Watches `directory` and drives registrations through `register` / `deregister`."""

    def __init__(
        self,
        directory: Path,
        register: Callable[[str, str], Awaitable[None]],
        deregister: Callable[[str, str], Awaitable[None]],
        *,
        options: WatcherOptions,
    ) -> None:
        self._directory = directory
        self._register = register
        self._deregister = deregister
        self._options = options
        self._plugins: dict[str, _Plugin] = {}
        self._task: asyncio.Task[None] | None = None
        self._watch = DirectoryWatch(
            directory, relevant=_not_hidden, poll_interval=options.interval, name="plugins_registry"
        )

    def start(self) -> None:
        self._directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        self._watch.start()
        self._task = asyncio.create_task(self._run(), name=f"plugin-watcher {self._directory}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._watch.stop()
        tasks = [p.task for p in self._plugins.values() if p.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._plugins.clear()

    async def _run(self) -> None:
        while True:
            try:
                current = await asyncio.to_thread(_scan, self._directory)
            except OSError as err:
                log.warning("cannot scan plugin registry %s: %s", self._directory, err)
                current = {}
            await self._reconcile(current)
            await self._watch.wait_within(RESCAN_S)

    async def _reconcile(self, current: dict[str, _Identity]) -> None:
        for path in list(self._plugins):
            plugin = self._plugins[path]
            if current.get(path) != plugin.identity:
                del self._plugins[path]
                await self._forget(path, plugin)
        for path, identity in current.items():
            if path not in self._plugins:
                plugin = _Plugin(identity)
                self._plugins[path] = plugin
                plugin.task = asyncio.create_task(
                    self._handle(path, plugin), name=f"plugin-registration {path}"
                )

    async def _forget(self, path: str, plugin: _Plugin) -> None:
        if plugin.task is not None and not plugin.task.done():
            plugin.task.cancel()
            await asyncio.gather(plugin.task, return_exceptions=True)
        if plugin.registered is not None:
            name, endpoint = plugin.registered
            log.info("plugin socket %s is gone: deregistering %s at %s", path, name, endpoint)
            await self._deregister(name, endpoint)

    async def _handle(self, path: str, plugin: _Plugin) -> None:
        try:
            channel = await dial(path, self._options.dial)
        except PluginCallError as err:
            log.warning("plugin registry socket %s: %s", path, err)
            return
        try:
            stub = reg_grpc.RegistrationStub(channel)
            try:
                info = await stub.GetInfo(reg.InfoRequest(), timeout=self._options.get_info)
            except grpc.aio.AioRpcError as err:
                log.warning("GetInfo on %s failed: %s", path, describe_rpc_error(err, self._options.get_info))
                return
            error = await self._register_info(path, info)
            if error is None:
                plugin.registered = (info.name, info.endpoint or path)
            else:
                log.warning("%s", error)
            try:
                await stub.NotifyRegistrationStatus(
                    reg.RegistrationStatus(plugin_registered=error is None, error=error or ""),
                    timeout=self._options.notify,
                )
            except grpc.aio.AioRpcError as err:
                log.warning(
                    "RegisterPlugin error -- failed to send registration status at socket %s, err: %s",
                    path,
                    describe_rpc_error(err, self._options.notify),
                )
        finally:
            await channel.close(None)

    async def _register_info(self, path: str, info: reg.PluginInfo) -> str | None:
        """Register the plugin `info` describes; the error text to notify, None on success."""
        if info.type != DEVICE_PLUGIN_TYPE:
            return (
                f"RegisterPlugin error -- no handler registered for plugin type: {info.type} at socket {path}"
            )
        try:
            validate_plugin(info.name, list(info.supported_versions))
        except RegistrationError as err:
            return f"RegisterPlugin error -- plugin validation failed with err: {err}"
        try:
            await self._register(info.name, info.endpoint or path)
        except RegistrationError as err:
            return f"RegisterPlugin error -- plugin registration failed with err: {err}"
        return None


def start_watching(directory: Path, endpoints: EndpointLifecycle, options: WatcherOptions) -> PluginWatcher:
    """A started watcher of `directory` whose plugins connect like kubelet.sock registrations."""
    watcher = PluginWatcher(directory, endpoints.connect_client, endpoints.disconnect_client, options=options)
    watcher.start()
    return watcher
