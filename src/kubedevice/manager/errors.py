"""The device manager's errors. Each str() is the kubelet's own message text, so logs read the same."""

from __future__ import annotations

from kubedevice.pluginwatcher.handler import PluginHandlerError


class DeviceManagerError(Exception):
    """Base of every error the device manager raises on purpose."""


class AdmissionError(DeviceManagerError):
    """A container cannot get its devices; the pod fails admission with this text."""


class RunOptionsError(DeviceManagerError):
    """A container cannot start: PreStartContainer failed or its devices are not known."""


class RegistrationError(DeviceManagerError, PluginHandlerError):
    """A plugin's registration was refused; `invalid` tells a bad request from a failed connection.

    Also a PluginHandlerError, so the plugin watcher reports it to a plugin of plugins_registry."""

    def __init__(self, message: str, *, invalid: bool = False) -> None:
        super().__init__(message)
        self.invalid = invalid


class PluginCallError(DeviceManagerError):
    """A call to a plugin failed or ran past its deadline."""
