"""The default prepare: a device plugin's `allocate()` turned into a prepared claim with a CDI spec.

DRA hands a container nothing but CDI device IDs, so what an `Allocation` carries besides them (env,
mounts, device nodes) goes into one CDI spec file per claim, ``kubedevice-<driver>-<claimUID>.json``
of kind ``<driver>/claim``, with one CDI device per request, named ``<claimUID>-<request>``. That
device's ID is given with the request's first device only: the container gets the edits once.
Annotations have no DRA channel and are dropped with a warning.

A share of a device (a result with a `shareID`, from consumable capacity) gets a CDI device of its own
in that spec, ``<claimUID>-<shareID>``, which sets ``KUBEDEVICE_SHARE_<DEVICE>=<shareID>`` and, for each
capacity the share consumes, ``KUBEDEVICE_SHARE_<DEVICE>_<CAPACITY>=<quantity>``: two claims sharing one
device never share a CDI device, and a container can tell which share it holds and how much of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi import CDIDevice, CDISpec, ContainerEdits, DeviceNode, Mount
from kubedevice.plugin.dra.model import AllocatedDevice, Claim, PreparedDevice
from kubedevice.plugin.model import Allocation, Device

log = logging.getLogger(__name__)

#: cdiVersion of the per-claim specs: names may start with a digit (UIDs do) and kinds hold dots.
CLAIM_SPEC_VERSION = "0.6.0"


class ClaimError(Exception):
    """A claim this driver cannot prepare; the message becomes that claim's error."""


def claim_spec_file_name(driver: str, claim_uid: str) -> str:
    return f"kubedevice-{driver}-{claim_uid}.json"


@dataclass(frozen=True)
class DefaultPrepared:
    devices: list[PreparedDevice]
    spec: CDISpec | None


async def prepare_with_allocate(
    plugin: DevicePlugin, driver: str, claim: Claim, inventory: Mapping[str, Device]
) -> DefaultPrepared:
    """Call `allocate` once per request of the claim with that request's devices; build the claim's spec."""
    prepared: list[PreparedDevice] = []
    cdi_devices: list[CDIDevice] = []
    for request, results in claim.requests().items():
        devices: list[Device] = []
        for result in results:
            device = inventory.get(result.device_id) if result.device_id is not None else None
            if device is None:
                raise ClaimError(
                    f"claim {claim}: device {result.device} of pool {result.pool} is not one of "
                    f"{driver}'s devices"
                )
            devices.append(device)
        allocation = await plugin.allocate(devices)
        if allocation.annotations:
            log.warning(
                "claim %s, request %s: annotations %s dropped (DRA passes CDI devices only)",
                claim,
                request,
                ", ".join(sorted(allocation.annotations)),
            )
        ids = list(allocation.cdi_devices)
        edits = _edits(allocation)
        if edits:
            name = f"{claim.uid}-{request}"
            cdi_devices.append(CDIDevice(name, edits))
            ids.append(f"{driver}/claim={name}")
        for number, result in enumerate(results):
            given = ids if number == 0 else []
            if result.share_id is not None:
                share = CDIDevice(f"{claim.uid}-{result.share_id}", _share_edits(result))
                cdi_devices.append(share)
                given = [*given, f"{driver}/claim={share.name}"]
            prepared.append(PreparedDevice(result, tuple(given)))
    spec = (
        CDISpec(kind=f"{driver}/claim", devices=tuple(cdi_devices), cdi_version=CLAIM_SPEC_VERSION)
        if cdi_devices
        else None
    )
    return DefaultPrepared(prepared, spec)


def _env_name(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).upper()


def _share_edits(result: AllocatedDevice) -> ContainerEdits:
    device = _env_name(result.device)
    consumed = (
        f"KUBEDEVICE_SHARE_{device}_{_env_name(name)}={quantity}"
        for name, quantity in sorted(result.consumed_capacity.items())
    )
    return ContainerEdits(env=(f"KUBEDEVICE_SHARE_{device}={result.share_id}", *consumed))


def _edits(allocation: Allocation) -> ContainerEdits:
    return ContainerEdits(
        env=tuple(f"{key}={value}" for key, value in allocation.envs.items()),
        mounts=tuple(
            Mount(m.host_path, m.container_path, ("bind", "ro") if m.read_only else ("bind",))
            for m in allocation.mounts
        ),
        device_nodes=tuple(
            DeviceNode(d.container_path, d.host_path, d.permissions) for d in allocation.devices
        ),
    )
