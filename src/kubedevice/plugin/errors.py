"""The SDK's exceptions: a small hierarchy so callers can catch exactly what they mean."""

from __future__ import annotations


class PluginError(Exception):
    """Base of every error the plugin SDK raises on purpose."""


class ConfigError(PluginError, ValueError):
    """The plugin or server was configured with something unusable (bad resource name, path too long...)."""


class InvalidRequest(PluginError):
    """Raised by an author's hook to reject a kubelet request; it becomes gRPC INVALID_ARGUMENT."""
