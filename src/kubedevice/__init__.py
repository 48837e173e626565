"""kubedevice: the Kubernetes device plugin framework in Python.

The node side (a device manager that does what the kubelet's does), the plugin
side (an SDK for device plugins that survive kubelet restarts) and the tools
around both.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kubedevice")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
