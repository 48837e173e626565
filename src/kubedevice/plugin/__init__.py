"""The plugin SDK: write what is special to your hardware, the SDK does the kubelet's protocol.

from kubedevice.plugin import Allocation, Device, DevicePlugin, serve

class MyPlugin(DevicePlugin):
    resource_name = "example.com/widget"

    async def devices(self) -> list[Device]:
        return [Device("widget-0"), Device("widget-1", numa_nodes=(1,))]

    async def allocate(self, devices):
        return Allocation(envs={"WIDGETS": ",".join(d.id for d in devices)})

serve(MyPlugin())
"""

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.entry import print_event, serve
from kubedevice.plugin.errors import ConfigError, InvalidRequest, PluginError
from kubedevice.plugin.events import EventKind, LifecycleEvent
from kubedevice.plugin.metrics import PluginMetrics
from kubedevice.plugin.model import Allocation, Device, DeviceSpec, Mount, PluginOptions
from kubedevice.plugin.server import DEFAULT_PLUGIN_DIR, DEFAULT_REGISTRY_DIR, Backoff, PluginServer
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
