"""The plugin SDK: write what is special to your hardware, the SDK does the kubelet's protocol.

    from kubedevice.plugin import Allocation, Device, DevicePlugin, serve

    class MyPlugin(DevicePlugin):
        resource_name = "example.com/widget"

        async def devices(self) -> list[Device]:
            return [Device("widget-0"), Device("widget-1", numa_nodes=(1,))]

        async def allocate(self, devices):
            return Allocation(envs={"WIDGETS": ",".join(d.id for d in devices)})

    serve(MyPlugin())

The SDK serves the plugin on its own unix socket in the kubelet's device plugin folder, registers once
the first device list is known, streams every change of the list to the kubelet, checks the kubelet's
requests before a hook sees them, and registers again, once, after each kubelet restart. Every hook is
a method of `DevicePlugin`; the sections below say when the SDK calls each and what it must return.
"""

from kubedevice.backoff import Backoff
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.entry import print_event, serve
from kubedevice.plugin.errors import ConfigError, InvalidRequest, PluginError
from kubedevice.plugin.events import EventKind, LifecycleEvent
from kubedevice.plugin.metrics import PluginMetrics
from kubedevice.plugin.model import Allocation, Device, DeviceSpec, Mount, PluginOptions
from kubedevice.plugin.server import DEFAULT_PLUGIN_DIR, DEFAULT_REGISTRY_DIR, PluginServer
from kubedevice.plugin.sharing import SharedDevices, SharedPlugin

__all__ = [
    "DEFAULT_PLUGIN_DIR",
    "DEFAULT_REGISTRY_DIR",
    "Allocation",
    "Backoff",
    "ConfigError",
    "Device",
    "DevicePlugin",
    "DeviceSpec",
    "EventKind",
    "InvalidRequest",
    "LifecycleEvent",
    "Mount",
    "PluginError",
    "PluginMetrics",
    "PluginOptions",
    "PluginServer",
    "SharedDevices",
    "SharedPlugin",
    "print_event",
    "serve",
]
