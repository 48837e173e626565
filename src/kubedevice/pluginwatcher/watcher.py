"""Registration through a plugins_registry directory (the kubelet's plugin manager and its reconciler).

The directory is watched (inotify, or polling every `interval` where inotify cannot be used) and scanned
again on every change and every RESCAN_S; a scan finds unix sockets; each new one is asked GetInfo, handed
to the handler of its plugin type (validate, then register) and told the outcome. A socket that disappears
deregisters its plugin; one that re-appears with a new identity is deregistered, then registered again.
Hidden names (starting with ".") are ignored.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.pluginwatcher.handler import PluginHandler, PluginHandlerError, WatcherOptions
from kubedevice.tasks import cancel_and_wait
from kubedevice.watch import DirectoryWatch, Mask

log = logging.getLogger(__name__)

#: A full look at the directory this often even when inotify reported nothing (events can be lost).
RESCAN_S = 10.0

#: (inode, device, ctime) of a socket file: a new socket at the same path is a new plugin.
_Identity = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class _Registered:
    type: str
    name: str
    endpoint: str


@dataclass(slots=True)
class _Plugin:
    identity: _Identity
    task: asyncio.Task[None] | None = None
    registered: _Registered | None = None


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


async def _dial(socket_path: str, deadline: float) -> grpc.aio.Channel | None:
    """A connected channel to a registration socket, or None (logged) when none comes within `deadline`."""
    channel = grpc.aio.insecure_channel(
        "unix://" + socket_path, options=(("grpc.default_authority", "localhost"),)
    )
    try:
        await asyncio.wait_for(channel.channel_ready(), deadline)
    except TimeoutError:
        await channel.close(None)
        log.warning("plugin registry socket %s: no connection within %g s", socket_path, deadline)
        return None
    except BaseException:
        await channel.close(None)
        raise
    return channel


def _describe(err: grpc.aio.AioRpcError, deadline: float) -> str:
    if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"deadline of {deadline:g} s exceeded"
    return f"rpc error: code = {err.code().name} desc = {err.details()}"


class PluginWatcher:
    """Watches `directory` and drives registrations through `handlers`, keyed by PluginInfo.type."""

    def __init__(
        self, directory: Path, handlers: Mapping[str, PluginHandler], *, options: WatcherOptions
    ) -> None:
        self._directory = directory
        self._handlers = dict(handlers)
        self._options = options
        self._plugins: dict[str, _Plugin] = {}
        self._task: asyncio.Task[None] | None = None
        self._watch = DirectoryWatch(
            directory, relevant=_not_hidden, poll_interval=options.interval, name="plugins_registry"
        )

    @property
    def directory(self) -> Path:
        return self._directory

    def start(self) -> None:
        self._directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        self._watch.start()
        self._task = asyncio.create_task(self._run(), name=f"plugin-watcher {self._directory}")

    async def stop(self) -> None:
        """Stop watching; registered plugins stay registered (their managers stop them)."""
        await cancel_and_wait(self._task)
        self._task = None
        await self._watch.stop()
        await cancel_and_wait(*(p.task for p in self._plugins.values()))
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
        await cancel_and_wait(plugin.task)
        done = plugin.registered
        if done is not None:
            log.info(
                "plugin socket %s is gone: deregistering %s %s at %s",
                path,
                done.type,
                done.name,
                done.endpoint,
            )
            try:
                await self._handlers[done.type].deregister_plugin(done.name, done.endpoint)
            except Exception:
                log.exception("deregistering %s %s at %s failed", done.type, done.name, done.endpoint)

    async def _handle(self, path: str, plugin: _Plugin) -> None:
        channel = await _dial(path, self._options.dial)
        if channel is None:
            return
        try:
            stub = reg_grpc.RegistrationStub(channel)
            try:
                info = await stub.GetInfo(reg.InfoRequest(), timeout=self._options.get_info)
            except grpc.aio.AioRpcError as err:
                log.warning("GetInfo on %s failed: %s", path, _describe(err, self._options.get_info))
                return
            endpoint = info.endpoint or path
            error = await self._register_info(path, info, endpoint)
            if error is None:
                plugin.registered = _Registered(info.type, info.name, endpoint)
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
                    _describe(err, self._options.notify),
                )
        finally:
            await channel.close(None)

    async def _register_info(self, path: str, info: reg.PluginInfo, endpoint: str) -> str | None:
        """Register the plugin `info` describes; the error text to notify, None on success."""
        handler = self._handlers.get(info.type)
        if handler is None:
            return (
                f"RegisterPlugin error -- no handler registered for plugin type: {info.type} at socket {path}"
            )
        versions = list(info.supported_versions)
        try:
            handler.validate_plugin(info.name, endpoint, versions)
        except PluginHandlerError as err:
            return f"RegisterPlugin error -- plugin validation failed with err: {err}"
        try:
            await handler.register_plugin(info.name, endpoint, versions)
        except PluginHandlerError as err:
            return f"RegisterPlugin error -- plugin registration failed with err: {err}"
        return None
