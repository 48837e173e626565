"""The fake driver's DRA shapes, as the dra-example-driver publishes them, so its demos run against it:

- partitions (`--partitions N`): each GPU `<prefix>-<i>` is a counter set `<prefix>-<i>-counters`
  (memory 80Gi, compute 100), N partition devices `<prefix>-<i>-partition-<j>` each consuming an N-th of it
  and a full device `<prefix>-<i>-full` consuming all of it: never a full GPU beside one of its partitions;
- shared devices (`--shared`): `allowMultipleAllocations` with memory and compute capacities whose request
  policy is the example driver's (default the whole, a valid range from 1Gi / 1 in steps of 1Gi / 1);
- NICs (`--net`): the example driver's net profile, devices `nic-<i>` shared by several claims
  (`allowMultipleAllocations`), each with `ingressBandwidth` and `egressBandwidth` of 100G (a claim naming
  no amount takes 1G; 100M to 100G in steps of 1M) and 100 `vfs`, one per claim;
- taints (`--taint KEY[=VALUE]:EFFECT[@DEVICE]`, and at run time in the health file);
- binding conditions (`--binding-delay S`): every device has `BindingConditions` and
  `BindingFailureConditions`; the fake watches the allocated claims (`allocated_claims()`, polled with its
  devices) and sets `BindingConditions` True on each allocated device S seconds after it first saw it,
  as the example driver's controller plugin does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubedevice.plugin.dra.backend_api import ClaimFetchError, ClaimStatusError
from kubedevice.plugin.dra.device_model import (
    CapacityRange,
    CapacityRequestPolicy,
    CounterSet,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
)
from kubedevice.plugin.dra.model import Claim
from kubedevice.plugin.errors import ConfigError
from kubedevice.statusapi.client import StatusClientError

log = logging.getLogger(__name__)

#: A whole fake GPU, as the example driver's: 80Gi of memory and 100 units of compute.
GPU_MEMORY_GI = 80
GPU_COMPUTE = 100
#: The example driver's binding condition types.
BINDING_CONDITION = "BindingConditions"
BINDING_FAILURE_CONDITION = "BindingFailureConditions"


def parse_taint(text: str, flag: str = "--taint") -> tuple[str | None, DeviceTaint]:
    """`KEY[=VALUE]:EFFECT[@DEVICE]` → (the device, or None for every device; the taint); a ConfigError
    names `flag`."""
    body, at, device = text.rpartition("@") if "@" in text else (text, "", "")
    key_value, colon, effect = body.rpartition(":")
    key, _, value = key_value.partition("=")
    if not colon or not key:
        raise ConfigError(
            f"{flag} {text!r} is not KEY[=VALUE]:EFFECT[@DEVICE] — write e.g. "
            "example.com/broken=true:NoSchedule@gpu-1"
        )
    try:
        taint = DeviceTaint(key, effect, value)  # type: ignore[arg-type]
    except ValueError as err:
        raise ConfigError(f"{flag} {text!r}: {err}") from None
    return (device if at else None), taint


#: The example driver's net profile: each NIC's bandwidth, either way, and virtual functions (one a claim).
NIC_BANDWIDTH = DeviceCapacity(
    "100G", CapacityRequestPolicy(default="1G", valid_range=CapacityRange(min="100M", max="100G", step="1M"))
)
NIC_VFS = DeviceCapacity("100", CapacityRequestPolicy(default="1", valid_values=("1",)))


def _shared_capacity(value: str, step: str) -> DeviceCapacity:
    return DeviceCapacity(
        value, CapacityRequestPolicy(default=value, valid_range=CapacityRange(min=step, max=value, step=step))
    )


@dataclass(frozen=True)
class DRAShape:
    """What the fake's DRA devices look like beyond their IDs."""

    partitions: int = 0
    shared: bool = False
    binding_delay: float | None = None
    #: The NICs of the example driver's net profile instead of GPUs.
    net: bool = False

    def __post_init__(self) -> None:
        if self.net and (self.partitions or self.shared):
            raise ConfigError("--net publishes NICs of their own shape — drop --partitions and --shared")
        if self.partitions < 0 or self.partitions > GPU_COMPUTE:
            raise ConfigError(f"--partitions must be 0 to {GPU_COMPUTE}, got {self.partitions}")
        if self.binding_delay is not None and self.binding_delay < 0:
            raise ConfigError(f"--binding-delay must be >= 0 seconds, got {self.binding_delay}")

    def device_ids(self, gpus: Sequence[str]) -> list[str]:
        """The devices of these GPUs: the GPUs themselves, or with partitions each one's parts and whole."""
        if not self.partitions:
            return list(gpus)
        return [
            device
            for gpu in gpus
            for device in (*(f"{gpu}-partition-{j}" for j in range(self.partitions)), f"{gpu}-full")
        ]

    def gpu_of(self, device_id: str) -> str:
        """The GPU a device is (a part) of."""
        return device_id.rpartition("-partition-")[0] or device_id.removesuffix("-full")

    def fields(self, device_id: str) -> dict[str, Any]:
        """The `Device` fields of one device: attributes, capacity and the DRA fields."""
        out: dict[str, Any] = {"attributes": {}, "capacity": {}}
        if self.net:
            out["allow_multiple_allocations"] = True
            bandwidth = {"ingressBandwidth": NIC_BANDWIDTH, "egressBandwidth": NIC_BANDWIDTH}
            out["capacity"] = {"vfs": NIC_VFS, **bandwidth}
        memory, compute = f"{GPU_MEMORY_GI}Gi", str(GPU_COMPUTE)
        if self.partitions:
            whole = device_id.endswith("-full")
            if not whole:
                memory = f"{GPU_MEMORY_GI // self.partitions}Gi"
                compute = str(GPU_COMPUTE // self.partitions)
                out["attributes"]["partition"] = int(device_id.rpartition("-")[2])
            out["attributes"]["partitionable"] = True
            if whole:
                out["attributes"]["full"] = True
            out["consumes_counters"] = (
                DeviceCounterConsumption(
                    f"{self.gpu_of(device_id)}-counters", {"memory": memory, "compute": compute}
                ),
            )
        if self.shared:
            out["allow_multiple_allocations"] = True
            out["capacity"] = {
                "memory": _shared_capacity(memory, "1Gi"),
                "compute": _shared_capacity(compute, "1"),
            }
        elif self.partitions:
            out["capacity"] = {"memory": memory, "compute": compute}
        if self.binding_delay is not None:
            out["binding_conditions"] = (BINDING_CONDITION,)
            out["binding_failure_conditions"] = (BINDING_FAILURE_CONDITION,)
        return out

    def counter_sets(self, gpus: Sequence[str]) -> list[CounterSet]:
        if not self.partitions:
            return []
        counters = {"memory": f"{GPU_MEMORY_GI}Gi", "compute": str(GPU_COMPUTE)}
        return [CounterSet(f"{gpu}-counters", counters) for gpu in gpus]


class BindingMarker:
    """Sets `BindingConditions` True on each allocated device of the fake `delay` seconds after it first saw
    the allocation; called with the allocated claims at each poll of the fake's devices."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._seen: dict[tuple[str, str, str, str], float] = {}

    def due(self, claims: Sequence[Claim]) -> list[tuple[Claim, Any]]:
        """The (claim, result) pairs whose binding condition is to be set now."""
        now = time.monotonic()
        due, current = [], set()
        for claim in claims:
            for result in claim.results:
                if BINDING_CONDITION not in result.binding_conditions:
                    continue
                key = (claim.uid, result.pool, result.device, result.share_id or "")
                current.add(key)
                status = claim.status(result)
                if status is not None and any(
                    c.type == BINDING_CONDITION and c.status == "True" for c in status.conditions
                ):
                    continue
                if now - self._seen.setdefault(key, now) >= self.delay:
                    due.append((claim, result))
        self._seen = {k: v for k, v in self._seen.items() if k in current}
        return due


async def mark_bound(plugin: Any, marker: BindingMarker) -> None:
    """One pass: the allocations whose delay is over get their binding condition. Never raises: the fake's
    device list must not fail because the daemon is away for a moment."""
    try:
        claims = await plugin.allocated_claims()
        for claim, result in marker.due(claims):
            await plugin.set_device_condition(
                claim.ref, result, BINDING_CONDITION, reason="Ready", message="Device is ready"
            )
            log.info("binding condition %s True for %s of claim %s", BINDING_CONDITION, result.device, claim)
    except RuntimeError:
        return  # the DRA face does not serve yet
    except (ClaimFetchError, ClaimStatusError, StatusClientError) as err:
        log.warning("cannot set binding conditions now: %s", err)


def device_taints(
    device_id: str,
    fixed: Sequence[tuple[str | None, DeviceTaint]],
    from_file: Mapping[str, Sequence[DeviceTaint]],
) -> tuple[DeviceTaint, ...]:
    """The taints of one device: those of `--taint` for it (or for every device), then the health file's."""
    return (*(t for device, t in fixed if device in (None, device_id)), *from_file.get(device_id, ()))
