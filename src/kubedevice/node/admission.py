"""Admitting a pod the kubelet's way: devices for every container, then each container's run options."""

from __future__ import annotations

import asyncio
import time

from kubedevice.manager import Container, DeviceManager, Pod, RunContainerOptions


def _starting_order(pod: Pod) -> list[Container]:
    # The kubelet allocates all init containers first, in spec order, then the app containers (SPEC §5.1).
    return [*pod.init_containers, *pod.containers]


async def admit(
    manager: DeviceManager, pod: Pod, *, already_running: bool = False
) -> dict[str, RunContainerOptions | None]:
    """Allocate every container's devices, then start each one: its run options (PreStartContainer first).

    `already_running` is for a pod that was Running before a restart of the daemon (same boot): its
    containers keep what they hold without any check, as the kubelet's do (its `isContainerAlreadyRunning`),
    and their run options are the cached ones (they started long ago: no PreStartContainer).
    Raises the manager's AdmissionError or RunOptionsError.
    """
    for container in _starting_order(pod):
        await manager.allocate(pod, container, already_running=already_running)
    options: dict[str, RunContainerOptions | None] = {}
    for container in _starting_order(pod):
        options[container.name] = await manager.get_device_run_container_options(
            pod, container, already_running=already_running
        )
    return options


def device_needs(pod: Pod) -> dict[str, int]:
    """Devices the pod needs at its peak: the larger of any init container and all the rest together."""
    needs: dict[str, int] = {}
    running: dict[str, int] = {}
    for c in pod.init_containers:
        for resource, count in c.limits.items():
            needs[resource] = max(needs.get(resource, 0), running.get(resource, 0) + count)
        if c.restart_policy == "Always":
            for resource, count in c.limits.items():
                running[resource] = running.get(resource, 0) + count
    for c in pod.containers:
        for resource, count in c.limits.items():
            running[resource] = running.get(resource, 0) + count
    for resource, count in running.items():
        needs[resource] = max(needs.get(resource, 0), count)
    return {r: n for r, n in needs.items() if n > 0}


def missing_devices(manager: DeviceManager, pod: Pod) -> dict[str, str]:
    """resource -> why the node cannot give the pod its devices now; empty when it can."""
    status = {r.resource_name: r for r in manager.registered_resources()}
    held = _held_devices(manager, pod)
    missing: dict[str, str] = {}
    for resource, needed in sorted(device_needs(pod).items()):
        s = status.get(resource)
        if s is None:
            missing[resource] = "no plugin registered"
        elif s.state != "running":
            missing[resource] = "its plugin is not running"
        elif held.get(resource) and not held[resource] <= _healthy(manager, resource):
            missing[resource] = "the devices it holds are not healthy"
        elif (free := s.healthy - s.allocated + len(held.get(resource, ()))) < needed:
            missing[resource] = f"{max(free, 0)} free healthy devices, {needed} needed"
    return missing


def _held_devices(manager: DeviceManager, pod: Pod) -> dict[str, set[str]]:
    """resource -> devices the pod already holds (from the checkpoint, after a node reboot)."""
    held: dict[str, set[str]] = {}
    for container in _starting_order(pod):
        for resource, devices in (manager.get_devices(pod.uid, container.name) or {}).items():
            held.setdefault(resource, set()).update(devices)
    return held


def _healthy(manager: DeviceManager, resource: str) -> frozenset[str]:
    devices = manager.resource_devices(resource)
    return devices[0] if devices is not None else frozenset()


async def wait_for_devices(manager: DeviceManager, pod: Pod, wait: float) -> dict[str, str]:
    """Wait up to `wait` seconds for the pod's resources to be registered with enough healthy devices.

    Wakes on the manager's change notifications. Returns what is still missing (empty: ready).
    """
    deadline = time.monotonic() + wait
    while True:
        version = manager.version
        missing = missing_devices(manager, pod)
        remaining = deadline - time.monotonic()
        if not missing or remaining <= 0:
            return missing
        try:
            async with asyncio.timeout(remaining):
                await manager.wait_for_change(version)
        except TimeoutError:
            return missing_devices(manager, pod)
