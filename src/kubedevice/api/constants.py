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

# --- Dynamic Resource Allocation (DRA) on the node ---

#: The plugin type a DRA driver's kubelet plugin reports in GetInfo (plugins_registry only, not kubelet.sock).
DRA_PLUGIN_TYPE: Final = "DRAPlugin"
#: The names a DRA plugin advertises in supported_versions: gRPC service names, not API versions.
DRA_V1_SERVICE: Final = "v1.DRAPlugin"
DRA_V1BETA1_SERVICE: Final = "v1beta1.DRAPlugin"
#: The 1.31 service's advertised name; kubedevice serves and calls it on neither side.
DRA_V1ALPHA3_SERVICE: Final = "v1alpha3.NodeService"
#: The DRAPlugin services the node side calls, in the kubelet's order of preference.
DRA_SUPPORTED_SERVICES: Final = (DRA_V1_SERVICE, DRA_V1BETA1_SERVICE)
#: The health services a plugin may advertise; the first one advertised of these is streamed.
DRA_HEALTH_V1_SERVICE: Final = "v1.DRAResourceHealth"
DRA_HEALTH_V1ALPHA1_SERVICE: Final = "v1alpha1.DRAResourceHealth"
DRA_HEALTH_SERVICES: Final = (DRA_HEALTH_V1_SERVICE, DRA_HEALTH_V1ALPHA1_SERVICE)

#: Full gRPC service names, for method paths and metric labels.
DRA_V1_GRPC_SERVICE: Final = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
DRA_V1BETA1_GRPC_SERVICE: Final = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"

#: Deadline of NodePrepareResources and NodeUnprepareResources (the kubelet's defaultClientCallTimeout).
DRA_CALL_TIMEOUT_S: Final = 45.0
#: How long a driver's ResourceSlices outlive its last connected plugin (the kubelet's defaultWipingDelay).
DRA_WIPE_DELAY_S: Final = 30.0
#: How often prepared claims of pods that are gone are unprepared (defaultReconcilePeriod).
DRA_RECONCILE_PERIOD_S: Final = 60.0
#: How long the scheduler waits for a device's binding conditions (BindingTimeoutDefaultSeconds).
DRA_BINDING_TIMEOUT_S: Final = 600.0
#: A device's health without a new report after this long (or its own timeout) reads as Unknown.
DRA_HEALTH_TIMEOUT_S: Final = 30.0
#: How soon a health stream that ended is opened again.
DRA_HEALTH_RETRY_S: Final = 5.0

#: The DRA manager's checkpoint, in the kubelet's root directory (not the device plugin directory).
DRA_CHECKPOINT_NAME: Final = "dra_manager_state"
#: Where DRA drivers keep their sockets on a real node: /var/lib/kubelet/plugins/<driver>/.
DRA_PLUGINS_PATH: Final = "/var/lib/kubelet/plugins/"
