"""Admitting a pod the kubelet's way: the topology manager's admit (hints, merge, devices for every
container), the checkpoint holding the devices, then each container's run options; and what the pod runs
without, said once as it is admitted."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kubedevice.dra.claim_names import resolve
from kubedevice.dra.types import DRAPod
from kubedevice.manager import (
    Container,
    DeviceManager,
    DeviceManagerError,
    Pod,
    RunContainerOptions,
)
from kubedevice.manager.topology_hints import pod_device_requests
from kubedevice.node.topology_refusal import refusal_detail
from kubedevice.resource.model import ClaimDocument
from kubedevice.topology import ERR_TOPOLOGY_AFFINITY, TopologyManager

log = logging.getLogger(__name__)


class PodRejected(Exception):
    """An admit handler refused the pod: the kubelet's status reason and message, and the daemon's own
    `detail` of why (for a TopologyAffinityError: each resource's hints and free devices per NUMA node)."""

    def __init__(self, reason: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.detail = detail


def _starting_order(pod: Pod) -> list[Container]:
    # The kubelet allocates all init containers first, in spec order, then the app containers.
    return [*pod.init_containers, *pod.containers]


async def admit(
    topology: TopologyManager, manager: DeviceManager, pod: Pod, *, already_running: bool = False
) -> dict[str, RunContainerOptions | None]:
    """The topology manager admits the pod (hints merged and stored, then every container's devices),
    then each container starts: its run options (PreStartContainer first). For a manager that checkpoints
    each Allocate (the default); the node daemon's does not, and runs the steps itself.

    `already_running` is for a pod that was Running before a restart of the daemon (same boot): it is
    admitted again as the kubelet does, so its hints are regenerated from what it holds, but its containers
    keep what they hold without any check (the kubelet's `isContainerAlreadyRunning`) and their run
    options are the cached ones (no PreStartContainer); a restart never fails it, even when the topology
    manager would now refuse it. Raises PodRejected, or the manager's AdmissionError or RunOptionsError
    with its own text.
    """
    await allocate_pod(topology, manager, pod, already_running=already_running)
    return await start_containers(manager, pod, already_running=already_running)


async def allocate_pod(
    topology: TopologyManager, manager: DeviceManager, pod: Pod, *, already_running: bool = False
) -> list[str]:
    """The topology manager's admit: hints merged and stored, then every container's devices. With a
    manager that does not checkpoint each Allocate, the devices are not on disk yet (its write_checkpoint).

    Returns what the pod runs without: one warning per resource it asks for that no plugin serves (the
    kubelet runs such a container without it), also logged once here at WARNING.
    """
    if already_running:
        manager.mark_running((pod.uid, c.name) for c in _starting_order(pod))
    result = await topology.admit(pod)
    if result.admit:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "pod %s/%s (%s) got devices: %s", pod.namespace, pod.name, pod.uid, _held_text(manager, pod)
            )
        return _unserved(manager, pod)
    if already_running:
        log.warning(
            "pod %s/%s keeps running after the restart although %s", pod.namespace, pod.name, result.message
        )
        return []
    if isinstance(result.error, DeviceManagerError):
        raise result.error
    # Taken now, before any other admission runs: the hints and free devices the policy refused.
    detail = refusal_detail(topology, manager, pod, result) if result.reason == ERR_TOPOLOGY_AFFINITY else ""
    raise PodRejected(result.reason, f"Pod was rejected: {result.message}", detail)


def _unserved(manager: DeviceManager, pod: Pod) -> list[str]:
    served = {r.resource_name for r in manager.registered_resources()}
    held = _held_devices(manager, pod)
    warnings = [
        f"{resource}: no plugin serves this resource; the container runs without it"
        for resource in sorted(device_needs(pod))
        if resource not in served and not held.get(resource)
    ]
    for warning in warnings:
        log.warning("pod %s/%s (%s): %s", pod.namespace, pod.name, pod.uid, warning)
    return warnings


def unknown_requests(pod: DRAPod, claim: Callable[[str, str], ClaimDocument | None]) -> list[str]:
    """What the pod runs without: a container's `resources.claims[].request` that its claim does not have.

    The API server does not check it against the claim (which may not exist yet), and the kubelet gives
    such a container no device of the claim, without a word; so the daemon says it, once per admission:
    one warning each, also logged here at WARNING. `claim(namespace, name)` is the claim as allocated;
    its requests are its allocation's (`gpu/large`, a subrequest, is request `gpu`).
    """
    pod_claims = {c.name: c for c in pod.resource_claims}
    warnings: list[str] = []
    for container in pod.containers:
        for used in container.claims:
            pod_claim = pod_claims.get(used.name)
            if not used.request or pod_claim is None:
                continue
            name = resolve(pod, pod_claim)
            document = claim(pod.namespace, name.claim_name) if name is not None else None
            if document is None or document.allocation is None:
                continue
            requests = {r.request.split("/", 1)[0] for r in document.allocation.results}
            if used.request not in requests:
                warnings.append(
                    f"claim {used.name}, request {used.request}: ResourceClaim {document.meta.name} has no "
                    f"such request (its requests: {', '.join(sorted(requests))}); container "
                    f"{container.name} runs without it"
                )
    for warning in warnings:
        log.warning("pod %s/%s (%s): %s", pod.namespace, pod.name, pod.uid, warning)
    return warnings


def _held_text(manager: DeviceManager, pod: Pod) -> str:
    """`main: example.com/gpu fake-0,fake-2; sidecar: none`, for the debug log."""
    parts = []
    for c in _starting_order(pod):
        devices = manager.get_devices(pod.uid, c.name) or {}
        held = " ".join(f"{r} {','.join(sorted(ids))}" for r, ids in sorted(devices.items()))
        parts.append(f"{c.name}: {held or 'none'}")
    return "; ".join(parts)


async def start_containers(
    manager: DeviceManager, pod: Pod, *, already_running: bool = False
) -> dict[str, RunContainerOptions | None]:
    """Each container's run options, in starting order (PreStartContainer first when asked for)."""
    options: dict[str, RunContainerOptions | None] = {}
    for container in _starting_order(pod):
        options[container.name] = await manager.get_device_run_container_options(
            pod, container, already_running=already_running
        )
    return options


def device_needs(pod: Pod) -> dict[str, int]:
    """Devices the pod needs at its peak: the larger of any init container and all the rest together."""
    return {r: n for r, n in pod_device_requests(pod).items() if n > 0}


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
