"""`PathsPlugin`: host files matching a glob (/dev/ttyUSB*, /dev/fuse, /dev/kvm) as devices.

Each matching file becomes `count` devices, so up to `count` containers can share it. A container
gets the files as device nodes (rw) or, with `mount`, as bind mounts. Files that appear or vanish
are picked up at the next poll.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import re
from collections.abc import Sequence

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.errors import ConfigError, InvalidRequest
from kubedevice.plugin.model import Allocation, Device, DeviceSpec, Mount
from kubedevice.plugin.naming import check_resource_name

_UNSAFE_IN_ID = re.compile(r"[^A-Za-z0-9._-]")

log = logging.getLogger(__name__)


def path_device_id(path: str, share: int) -> str:
    """/dev/ttyUSB0, share 1 -> dev_ttyUSB0-1: readable, unique per path, free of ',' and spaces."""
    return f"{_UNSAFE_IN_ID.sub('_', path.strip('/').replace('/', '_'))}-{share}"


class PathsPlugin(DevicePlugin):
    def __init__(
        self, resource: str, pattern: str, *, count: int = 1, mount: bool = False, poll_interval: float = 1.0
    ) -> None:
        self.resource_name = check_resource_name(resource)
        if not pattern.startswith("/"):
            raise ConfigError(f"glob must be an absolute path pattern, got {pattern!r}")
        if count < 1:
            raise ConfigError(f"count must be >= 1, got {count}")
        if poll_interval <= 0:
            raise ConfigError(f"poll interval must be > 0, got {poll_interval}")
        self.pattern = pattern
        self.count = count
        self.mount = mount
        self.poll_interval = poll_interval
        self._paths: dict[str, str] = {}
        self._warned_empty = False

    async def devices(self) -> Sequence[Device]:
        # glob walks directories: a thread, not the event loop.
        paths = await asyncio.to_thread(lambda: sorted(glob.glob(self.pattern)))
        if not paths and not self._warned_empty:
            # Said once: files may appear later (a device plugged in), and the plugin picks them up.
            log.warning(
                "no file matches %s yet: %s has no devices until one appears",
                self.pattern,
                self.resource_name,
            )
        self._warned_empty = not paths
        self._paths = {path_device_id(p, k): p for p in paths for k in range(self.count)}
        return [Device(device_id) for device_id in self._paths]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        gone = sorted(d.id for d in devices if d.id not in self._paths)
        if gone:
            raise InvalidRequest(f"device files vanished: {', '.join(gone)}")
        paths = sorted({self._paths[d.id] for d in devices})
        if self.mount:
            return Allocation(mounts=[Mount(p, p, read_only=False) for p in paths])
        return Allocation(devices=[DeviceSpec(p, p, "rw") for p in paths])
