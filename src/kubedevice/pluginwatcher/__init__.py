"""The plugins_registry watcher: one directory, one handler per plugin type (the kubelet's plugin manager).

Both node-side managers use it: the device manager's handler takes type `DevicePlugin`, the DRA
manager's takes `DRAPlugin`; the node daemon runs one watcher with both. The watcher itself is
:class:`kubedevice.pluginwatcher.watcher.PluginWatcher`, not imported here: a manager that only serves
kubelet.sock never loads it (nor inotify, nor the registration API).
"""

from kubedevice.pluginwatcher.handler import PluginHandler, PluginHandlerError, WatcherOptions

__all__ = ["PluginHandler", "PluginHandlerError", "WatcherOptions"]
