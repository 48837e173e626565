"""kubedevice: the Kubernetes device plugin framework in Python.

The node side (a device manager that does what the kubelet's does), the plugin
side (an SDK for device plugins that survive kubelet restarts) and the tools
around both.
"""

# The one place the version is kept; pyproject.toml reads it from here.
__version__ = "0.1.0"

__all__ = ["__version__"]
