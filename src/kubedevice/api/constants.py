"""Constants of the device plugin API v1beta1 and of the kubelet paths around it."""

from __future__ import annotations

from typing import Final

#: The API version a plugin sends in RegisterRequest.version.
VERSION: Final = "v1beta1"
#: Versions the device manager accepts.
SUPPORTED_VERSIONS: Final = ("v1beta1",)

#: Health strings. Only the exact string HEALTHY counts as healthy; anything else is unhealthy.
HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"

#: The kubelet's fixed device plugin directory (it does not follow --root-dir), with its trailing slash.
DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins/"
#: Name of the registration socket inside the device plugin directory.
KUBELET_SOCKET_NAME: Final = "kubelet.sock"
KUBELET_SOCKET: Final = DEVICE_PLUGIN_PATH + KUBELET_SOCKET_NAME
DEVICE_PLUGIN_PATH_WINDOWS: Final = "\\var\\lib\\kubelet\\device-plugins\\"
KUBELET_SOCKET_WINDOWS: Final = DEVICE_PLUGIN_PATH_WINDOWS + KUBELET_SOCKET_NAME

#: Plugin-watcher ("probe mode") registration directory and the plugin type device plugins report.
PLUGINS_REGISTRY_PATH: Final = "/var/lib/kubelet/plugins_registry/"
DEVICE_PLUGIN_TYPE: Final = "DevicePlugin"

#: The PodResources socket of a real kubelet.
POD_RESOURCES_SOCKET: Final = "/var/lib/kubelet/pod-resources/kubelet.sock"

#: Environment variable naming the plugin directory (argument > this > the default), for every SDK plugin
#: and the conformance checker, which sets it to its temporary directory.
PLUGIN_DIR_ENV: Final = "KUBEDEVICE_PLUGIN_DIR"

#: Name of the device manager's checkpoint file, kept in the device plugin directory.
CHECKPOINT_NAME: Final = "kubelet_internal_checkpoint"

#: Deadline of a PreStartContainer call, in seconds.
PRE_START_CONTAINER_TIMEOUT_S: Final = 30.0
#: How long the kubelet waits to dial a plugin socket, in seconds.
DIAL_TIMEOUT_S: Final = 10.0
#: Plugin-watcher deadlines, in seconds.
GET_INFO_TIMEOUT_S: Final = 1.0
NOTIFY_REGISTRATION_STATUS_TIMEOUT_S: Final = 5.0
#: How long a resource whose plugin went away stays in capacity, in seconds.
ENDPOINT_STOP_GRACE_PERIOD_S: Final = 5 * 60.0
