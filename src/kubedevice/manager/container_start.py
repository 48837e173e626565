"""Container start (the kubelet's `GetDeviceRunContainerOptions` and `callPreStartContainerIfNeeded`).

:class:`ContainerStart` calls PreStartContainer when a plugin asks for it, re-allocates a container whose
devices are unknown, and merges the container's cached allocate responses into its run options with
:func:`kubedevice.manager.run_options.merge_run_options`.
"""

from __future__ import annotations

from kubedevice.manager.allocator import Allocator
from kubedevice.manager.errors import PluginCallError, RunOptionsError
from kubedevice.manager.run_options import merge_run_options
from kubedevice.manager.state import ManagerState
from kubedevice.manager.types import Container, Pod, RunContainerOptions


class ContainerStart:
    def __init__(self, state: ManagerState, allocator: Allocator, pre_start_timeout: float) -> None:
        self._state = state
        self._allocator = allocator
        self._pre_start_timeout = pre_start_timeout

    async def get_device_run_container_options(
        self, pod: Pod, container: Container, *, already_running: bool = False
    ) -> RunContainerOptions | None:
        """The run options of a starting container; PreStartContainer first when asked for.

        A container `already_running` (it survived a restart of the manager) was started long ago: its
        options are its cached allocate responses, with no PreStartContainer and no re-allocation.
        Raises RunOptionsError (the container cannot start) or AdmissionError (re-allocation failed).
        """
        if already_running:
            return self._cached_options(pod, container)
        needs_reallocate = False
        active = set(self._allocator.active_pods()) if self._allocator.active_pods is not None else None
        for resource in sorted(container.limits):
            if not self._state.is_device_plugin_resource(resource) or container.limits[resource] == 0:
                continue
            await self._pre_start_if_needed(pod.uid, container.name, resource)
            if active is not None and pod.uid not in active:
                continue
            if self._state.pod_devices.container_devices(pod.uid, container.name, resource) is None:
                needs_reallocate = True
        if needs_reallocate:
            await self._allocator.allocate(pod, container, durable=True)
        return self._cached_options(pod, container)

    def _cached_options(self, pod: Pod, container: Container) -> RunContainerOptions | None:
        resources = self._state.pod_devices.container_resources(pod.uid, container.name)
        if resources is None:
            return None
        return merge_run_options((r, resources[r].alloc_resp) for r in sorted(resources))

    async def _pre_start_if_needed(self, pod_uid: str, container_name: str, resource: str) -> None:
        endpoint = self._state.endpoints.get(resource)
        if endpoint is None:
            raise RunOptionsError(f"endpoint not found in cache for a registered resource: {resource}")
        if endpoint.options is None or not endpoint.options.pre_start_required:
            return
        devices = self._state.pod_devices.container_devices(pod_uid, container_name, resource)
        if devices is None:
            raise RunOptionsError(
                f"no devices found allocated in local cache for pod {pod_uid}, container {container_name}, "
                f"resource {resource}"
            )
        try:
            await endpoint.pre_start_container(sorted(devices), self._pre_start_timeout)
        except PluginCallError as err:
            raise RunOptionsError(
                f"device plugin PreStartContainer rpc for {resource} failed with err: {err}"
            ) from None
