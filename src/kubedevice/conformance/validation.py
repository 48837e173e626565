"""Pure rules a plugin's answers must follow, each saying what is wrong in words its author can act on.

Kept free of gRPC and of the run so they can be tested on plain messages.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kubedevice.api.constants import HEALTHY, UNHEALTHY
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.plugin.cdi import CDIError, parse_qualified_name
from kubedevice.wording import counted

#: The comment in api.proto caps device IDs at 63 characters; the kubelet does not enforce it, tools may.
MAX_DEVICE_ID_LENGTH = 63
#: gRPC's default receive limit, which the kubelet keeps: a bigger ListAndWatch message breaks the stream.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: cgroup device permissions: read, write, mknod.
DEVICE_PERMISSIONS = frozenset("rwm")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Problems:
    """What one rule found: failures break containers or the kubelet, warnings are risky but work."""

    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: Problems) -> None:
        self.failures.extend(other.failures)
        self.warnings.extend(other.warnings)


def cdi_name_problem(name: str) -> str | None:
    """Why `name` is not a fully qualified CDI device name (`vendor.com/class=name`), or None.

    The runtime refuses such a name, so the container cannot be created.
    """
    try:
        parse_qualified_name(name)
    except CDIError as exc:
        return str(exc) if name in str(exc) else f"CDI device {name!r}: {exc}"
    return None


def env_name_problem(name: str) -> tuple[bool, str] | None:
    """(fatal, why) when `name` is not a portable environment variable name, or None when it is.

    Other printable names without '=' reach the container but many shells and tools cannot read them.
    """
    if _ENV_NAME.fullmatch(name):
        return None
    if not name or "=" in name or not name.isprintable():
        return True, f"env name {name!r} cannot be set in a container (empty, '=' or unprintable)"
    return False, f"env name {name!r} is not a portable name ([A-Za-z_][A-Za-z0-9_]*)"


def device_list_problems(devices: Sequence[dp.Device]) -> Problems:
    """ListAndWatch rules: non-empty unique IDs, exact health strings, IDs of at most 63 characters."""
    problems = Problems()
    counts = Counter(device.ID for device in devices)
    if counts.get("", 0):
        empty = counts[""]
        problems.failures.append(f"{counted(empty, 'device')} {'has' if empty == 1 else 'have'} an empty ID")
    duplicates = sorted(device_id for device_id, count in counts.items() if count > 1 and device_id)
    if duplicates:
        problems.failures.append(
            f"duplicate device IDs {short_list(duplicates)}: "
            "the kubelet keeps one and may count it twice in capacity"
        )
    odd_health = sorted({device.health for device in devices if device.health not in (HEALTHY, UNHEALTHY)})
    if odd_health:
        shown = ", ".join(repr(health) for health in odd_health)
        problems.warnings.append(
            f'health {shown} is neither "{HEALTHY}" nor "{UNHEALTHY}": the kubelet counts it as unhealthy'
        )
    long_ids = sorted(device.ID for device in devices if len(device.ID) > MAX_DEVICE_ID_LENGTH)
    if long_ids:
        problems.warnings.append(
            f"{counted(len(long_ids), 'device ID')} longer than {MAX_DEVICE_ID_LENGTH} characters, "
            f"e.g. {long_ids[0][:80]!r}"
        )
    return problems


def container_response_problems(response: dp.ContainerAllocateResponse) -> Problems:
    """What in one container's Allocate answer would break the container or the runtime."""
    problems = Problems()
    for spec in response.devices:
        what = f"device spec {spec.host_path!r} -> {spec.container_path!r}"
        if not spec.container_path.startswith("/"):
            problems.failures.append(f"{what}: container_path must be absolute")
        if not spec.host_path.startswith("/"):
            problems.failures.append(f"{what}: host_path must be absolute")
        if not spec.permissions or not set(spec.permissions) <= DEVICE_PERMISSIONS:
            problems.failures.append(
                f"{what}: permissions {spec.permissions!r} must be a non-empty mix of r, w, m"
            )
    for mount in response.mounts:
        what = f"mount {mount.host_path!r} -> {mount.container_path!r}"
        if not mount.container_path.startswith("/"):
            problems.failures.append(f"{what}: container_path must be absolute")
        if not mount.host_path.startswith("/"):
            problems.failures.append(f"{what}: host_path must be absolute")
    for name in sorted(response.envs):
        problem = env_name_problem(name)
        if problem is not None:
            fatal, env_why = problem
            (problems.failures if fatal else problems.warnings).append(env_why)
    for cdi_device in response.cdi_devices:
        cdi_why = cdi_name_problem(cdi_device.name)
        if cdi_why is not None:
            problems.failures.append(cdi_why)
    return problems


def preferred_allocation_problems(
    request: dp.ContainerPreferredAllocationRequest, answer: Sequence[str]
) -> list[str]:
    """Why a preferred allocation cannot be used as is: the kubelet trusts it to be a valid pick."""
    problems: list[str] = []
    available = set(request.available_deviceIDs)
    picked = list(answer)
    duplicates = sorted(device_id for device_id, count in Counter(picked).items() if count > 1)
    if duplicates:
        problems.append(f"answer repeats {short_list(duplicates)}")
    foreign = sorted(set(picked) - available)
    if foreign:
        problems.append(f"answer holds {short_list(foreign)}, which were not available")
    missing = sorted(set(request.must_include_deviceIDs) - set(picked))
    if missing:
        problems.append(f"answer leaves out must_include {short_list(missing)}")
    if len(picked) != request.allocation_size:
        asked = request.allocation_size
        was = "was" if asked == 1 else "were"
        problems.append(f"answer has {counted(len(picked), 'device')}, {asked} {was} requested")
    return problems


def short_list(values: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(values[:limit])
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return f"[{shown}{more}]"
