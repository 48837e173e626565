"""Merging a container's cached allocate responses into its run options (SPEC §6.3).

First occurrence wins for every kind of entry. The kubelet iterates Go maps, so its winners are random;
here resources go in sorted order and map entries in sorted key order, so the result is deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager.types import DeviceInfo, MountInfo, RunContainerOptions

log = logging.getLogger(__name__)


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
            value = resp.envs[name]
            if name in envs:
                if envs[name] != value:
                    log.warning(
                        "environment variable %s has conflicting settings (%r kept, %r from %s ignored)",
                        name,
                        envs[name],
                        value,
                        resource,
                    )
                continue
            envs[name] = value
            opts.envs.append((name, value))
        for m in resp.mounts:
            if m.container_path in mounts:
                if mounts[m.container_path] != m.host_path:
                    log.warning(
                        "container mount %s has conflicting host paths (%s kept, %s from %s ignored)",
                        m.container_path,
                        mounts[m.container_path],
                        m.host_path,
                        resource,
                    )
                continue
            mounts[m.container_path] = m.host_path
            opts.mounts.append(MountInfo(m.container_path, m.host_path, m.read_only))
        for d in resp.devices:
            if d.container_path in devices:
                if devices[d.container_path] != d.host_path:
                    log.warning(
                        "container device %s has conflicting host paths (%s kept, %s from %s ignored)",
                        d.container_path,
                        devices[d.container_path],
                        d.host_path,
                        resource,
                    )
                continue
            devices[d.container_path] = d.host_path
            opts.devices.append(DeviceInfo(d.host_path, d.container_path, d.permissions))
        for key in sorted(resp.annotations):
            value = resp.annotations[key]
            if key in annotations:
                if annotations[key] != value:
                    log.warning(
                        "annotation %s has conflicting settings (%r kept, %r from %s ignored)",
                        key,
                        annotations[key],
                        value,
                        resource,
                    )
                continue
            annotations[key] = value
            opts.annotations.append((key, value))
        for c in resp.cdi_devices:
            if c.name not in cdi:
                cdi.add(c.name)
                opts.cdi_devices.append(c.name)
    return opts
