"""What the plugin watcher asks of a manager (the kubelet's `cache.PluginHandler`), and its options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kubedevice.api.constants import DIAL_TIMEOUT_S, GET_INFO_TIMEOUT_S, NOTIFY_REGISTRATION_STATUS_TIMEOUT_S


class PluginHandlerError(Exception):
    """A handler refused a plugin; str() is the kubelet's text, which the watcher wraps and notifies."""


class PluginHandler(Protocol):
    """One plugin type's side of registration through plugins_registry.

    `endpoint` is the plugin's `PluginInfo.endpoint`, or its registration socket when that is empty.
    `validate_plugin` and `register_plugin` raise PluginHandlerError; `deregister_plugin` never fails.
    """

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None: ...

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None: ...

    async def deregister_plugin(self, name: str, endpoint: str) -> None: ...


@dataclass(frozen=True, slots=True)
class WatcherOptions:
    """The plugin watcher's: timeouts of its calls to a plugin of the plugins_registry directory, and
    how often it looks at the directory where inotify cannot be used. The defaults are the kubelet's."""

    dial: float = DIAL_TIMEOUT_S
    get_info: float = GET_INFO_TIMEOUT_S
    notify: float = NOTIFY_REGISTRATION_STATUS_TIMEOUT_S
    interval: float = 0.15
