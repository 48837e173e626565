"""The plain data the device manager speaks: pods and containers in, run options, hints and status out.

Pods are given by the caller (the node daemon reads them from manifests); there is no Kubernetes client
here, only the few fields the device manager looks at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kubedevice.topology.hint import TopologyHint

__all__ = ["TopologyHint"]  # the topology manager's hint, which the device manager's hints are

#: The restart policy that makes an init container a sidecar (a "restartable init container").
RESTART_POLICY_ALWAYS = "Always"


@dataclass(frozen=True, slots=True)
class Container:
    """A container as the device manager sees it: its name and its extended resource limits."""

    name: str
    limits: dict[str, int] = field(default_factory=dict)
    restart_policy: str | None = None


@dataclass(frozen=True, slots=True)
class Pod:
    uid: str
    namespace: str = "default"
    name: str = ""
    init_containers: list[Container] = field(default_factory=list)
    containers: list[Container] = field(default_factory=list)

    def is_init_container(self, container_name: str) -> bool:
        return any(c.name == container_name for c in self.init_containers)

    def is_restartable_init_container(self, container_name: str) -> bool:
        return any(
            c.name == container_name and c.restart_policy == RESTART_POLICY_ALWAYS
            for c in self.init_containers
        )


@dataclass(frozen=True, slots=True)
class MountInfo:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    path_on_host: str
    path_in_container: str
    permissions: str


@dataclass(frozen=True, slots=True)
class RunContainerOptions:
    """What the plugins' allocate responses add to one container."""

    envs: list[tuple[str, str]] = field(default_factory=list)
    mounts: list[MountInfo] = field(default_factory=list)
    devices: list[DeviceInfo] = field(default_factory=list)
    annotations: list[tuple[str, str]] = field(default_factory=list)
    cdi_devices: list[str] = field(default_factory=list)


EndpointState = Literal["running", "stopped"]
DeviceHealth = Literal["Healthy", "Unhealthy", "Unknown"]


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """One device-plugin resource as the daemon's status page shows it."""

    resource_name: str
    state: EndpointState
    #: Seconds since the last endpoint of the resource stopped; None while running.
    stopped_seconds: float | None
    #: Socket paths of the live endpoints, the primary (last connected) one first.
    endpoints: list[str]
    healthy: int
    unhealthy: int
    allocated: int
    #: Healthy devices that no container holds: what a new pod can get now.
    free: int
    pre_start_required: bool
    get_preferred_allocation_available: bool
    #: The last problem seen with what the plugin sent (duplicate IDs, unknown health strings), if any.
    last_warning: str | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """What changed in the manager; `pod_uids` lists pods whose allocated devices changed health."""

    kind: Literal["registered", "devices", "disconnected", "deleted", "allocated", "released"]
    resource_name: str | None = None
    pod_uids: tuple[str, ...] = ()
