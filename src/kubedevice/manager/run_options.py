"""Merging a container's cached allocate responses into its run options.

First occurrence wins for every kind of entry. The kubelet iterates Go maps, so its winners are random;
here resources go in sorted order and map entries in sorted key order, so the result is deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager.types import DeviceInfo, MountInfo, RunContainerOptions

log = logging.getLogger(__name__)


def _first_wins(seen: dict[str, str], what: str, key: str, value: str, resource: str) -> bool:
    """Record `key` -> `value` unless `key` was already set: True when this one is kept.

    A later different value is only logged, as the kubelet does.
    """
    if key in seen:
        if seen[key] != value:
            log.warning(
                "%s %s has conflicting settings (%r kept, %r from %s ignored)",
                what,
                key,
                seen[key],
                value,
                resource,
            )
        return False
    seen[key] = value
    return True


def merge_run_options(responses: Iterable[tuple[str, dp.ContainerAllocateResponse]]) -> RunContainerOptions:
    """Merge (resource name, response) pairs, in the order given."""
    opts = RunContainerOptions()
    envs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    mounts: dict[str, str] = {}
    devices: dict[str, str] = {}
    cdi: set[str] = set()
    for resource, resp in responses:
        for name in sorted(resp.envs):
            if _first_wins(envs, "environment variable", name, resp.envs[name], resource):
                opts.envs.append((name, resp.envs[name]))
        for m in resp.mounts:
            if _first_wins(mounts, "container mount", m.container_path, m.host_path, resource):
                opts.mounts.append(MountInfo(m.container_path, m.host_path, m.read_only))
        for d in resp.devices:
            if _first_wins(devices, "container device", d.container_path, d.host_path, resource):
                opts.devices.append(DeviceInfo(d.host_path, d.container_path, d.permissions))
        for key in sorted(resp.annotations):
            if _first_wins(annotations, "annotation", key, resp.annotations[key], resource):
                opts.annotations.append((key, resp.annotations[key]))
        for c in resp.cdi_devices:
            if c.name not in cdi:
                cdi.add(c.name)
                opts.cdi_devices.append(c.name)
    return opts
