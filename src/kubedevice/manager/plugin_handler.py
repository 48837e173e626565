"""The device manager's handler of plugins_registry registrations (type `DevicePlugin`).

A plugin found by the watcher is connected like a kubelet.sock registration, its endpoint used as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubedevice.api.constants import DEVICE_PLUGIN_TYPE, SUPPORTED_VERSIONS, VERSION
from kubedevice.manager.errors import RegistrationError
from kubedevice.resource.names import is_extended_resource_name

if TYPE_CHECKING:
    from kubedevice.manager.endpoint_lifecycle import EndpointLifecycle
    from kubedevice.pluginwatcher.handler import PluginHandler, WatcherOptions
    from kubedevice.pluginwatcher.watcher import PluginWatcher


def validate_plugin(name: str, versions: Sequence[str]) -> None:
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


class DevicePluginHandler:
    """The device manager's `GetWatcherHandler()`: a PluginHandler over the endpoint lifecycle."""

    def __init__(self, endpoints: EndpointLifecycle) -> None:
        self._endpoints = endpoints

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        validate_plugin(name, versions)

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        await self._endpoints.connect_client(name, endpoint)

    async def deregister_plugin(self, name: str, endpoint: str) -> None:
        await self._endpoints.disconnect_client(name, endpoint)


def start_watching(directory: Path, handler: PluginHandler, options: WatcherOptions) -> PluginWatcher:
    """A started watcher of `directory` with only the device manager's handler."""
    # Imported here: a manager that serves only kubelet.sock never loads the watcher, inotify or the
    # registration API.
    from kubedevice.pluginwatcher.watcher import PluginWatcher

    watcher = PluginWatcher(directory, {DEVICE_PLUGIN_TYPE: handler}, options=options)
    watcher.start()
    return watcher
