"""The exporter's metrics, built from one published snapshot per scrape (a custom collector).

Names and labels are the exporter's public contract (docs/exporter.md lists them with PromQL).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kubedevice.exporter.checkpoint_probe import CheckpointState
from kubedevice.exporter.dra_metrics import dra_families
from kubedevice.exporter.refresh import ScrapeSnapshot
from kubedevice.inventory.model import DeviceTopology, PodResourcesView, numa_label

DEVICE_LABELS = ["namespace", "pod", "container", "resource", "device", "numa_node"]


class SnapshotCollector:
    """Registered with a CollectorRegistry; `collect()` reads the snapshot once and yields from it only."""

    def __init__(
        self,
        snapshot: Callable[[], ScrapeSnapshot],
        clock: Callable[[], float] = time.time,
        lock: AbstractContextManager[object] | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._clock = clock
        self._lock = lock if lock is not None else contextlib.nullcontext()

    def collect(self) -> Iterator[Metric]:
        # The registry formats each family as it is yielded: holding the lock until the last one covers
        # the scrape's whole build-up of samples and text.
        with self._lock:
            s = self._snapshot()
            if s.view is not None:
                yield from _devices(s.view)
                yield from dra_families(s.view)
            yield from _checkpoint(s, self._clock())
            yield from _health(s)


def _devices(view: PodResourcesView) -> Iterator[Metric]:
    info = GaugeMetricFamily(
        "kubedevice_pod_device_info",
        "A device held by a container, as PodResources List reports it (sidecars included; plain init "
        "containers are not listed by the kubelet). numa_node is the device's NUMA nodes joined by commas, "
        "empty without topology.",
        labels=DEVICE_LABELS,
    )
    for h in view.held:
        info.add_metric([h.namespace, h.pod, h.container, h.resource, h.device, numa_label(h.numa_nodes)], 1)
    yield info

    held = view.held_ids()
    allocated = GaugeMetricFamily(
        "kubedevice_allocated_devices",
        "Devices of the resource held by listed containers.",
        labels=["resource"],
    )
    if view.allocatable is None:
        # A kubelet without GetAllocatableResources: what is held is known, what is free is not.
        for resource in sorted(held):
            allocated.add_metric([resource], len(held[resource]))
        yield allocated
    else:
        yield from _allocatable(view.allocatable, held, allocated)

    by_numa = GaugeMetricFamily(
        "kubedevice_allocated_devices_by_numa_node",
        "Held devices per NUMA node (a device on two nodes counts on each; numa_node is empty for "
        "devices without topology).",
        labels=["resource", "numa_node"],
    )
    counts: Counter[tuple[str, str]] = Counter()
    seen: set[tuple[str, str]] = set()
    for h in view.held:
        if (h.resource, h.device) in seen:
            continue
        seen.add((h.resource, h.device))
        for node in [str(n) for n in h.numa_nodes] or [""]:
            counts[(h.resource, node)] += 1
    for (resource, node), n in sorted(counts.items()):
        by_numa.add_metric([resource, node], n)
    yield by_numa


def _allocatable(
    allocatable: DeviceTopology, held: dict[str, set[str]], allocated: GaugeMetricFamily
) -> Iterator[Metric]:
    allocatable_info = GaugeMetricFamily(
        "kubedevice_allocatable_device_info",
        "A device GetAllocatableResources lists: the kubelet lists healthy devices only.",
        labels=["resource", "device", "numa_node"],
    )
    for resource, ids in sorted(allocatable.items()):
        for device, nodes in sorted(ids.items()):
            allocatable_info.add_metric([resource, device, numa_label(nodes)], 1)
    yield allocatable_info

    families = {
        "allocatable": GaugeMetricFamily(
            "kubedevice_allocatable_devices",
            "Devices of the resource GetAllocatableResources lists.",
            labels=["resource"],
        ),
        "free": GaugeMetricFamily(
            "kubedevice_free_devices", "Allocatable devices no listed container holds.", labels=["resource"]
        ),
        "unallocatable": GaugeMetricFamily(
            "kubedevice_allocated_unallocatable_devices",
            "Held devices GetAllocatableResources does not list: unhealthy, or their plugin is gone.",
            labels=["resource"],
        ),
    }
    for resource in sorted(set(held) | set(allocatable)):
        allocatable_ids = set(allocatable.get(resource, {}))
        held_ids = held.get(resource, set())
        families["allocatable"].add_metric([resource], len(allocatable_ids))
        allocated.add_metric([resource], len(held_ids))
        families["free"].add_metric([resource], len(allocatable_ids - held_ids))
        families["unallocatable"].add_metric([resource], len(held_ids - allocatable_ids))
    yield allocated
    yield from families.values()


def _checkpoint(s: ScrapeSnapshot, now: float) -> Iterator[Metric]:
    report = s.checkpoint
    if report is None:
        return
    state = GaugeMetricFamily(
        "kubedevice_checkpoint_state",
        "1 for the checkpoint file's current state, 0 for the others.",
        labels=["state"],
    )
    for value in CheckpointState:
        state.add_metric([value.value], 1 if report.state is value else 0)
    yield state
    yield GaugeMetricFamily(
        "kubedevice_checkpoint_verified",
        "1 when the checkpoint's checksum holds (the kubelet would restore it), 0 otherwise.",
        value=1 if report.state is CheckpointState.VERIFIED else 0,
    )
    if report.entries is not None:
        yield GaugeMetricFamily(
            "kubedevice_checkpoint_entries", "Pod device entries in the checkpoint.", value=report.entries
        )
    if report.modified is not None:
        yield GaugeMetricFamily(
            "kubedevice_checkpoint_modified_timestamp_seconds",
            "When the checkpoint was last written (its mtime).",
            value=report.modified,
        )
        yield GaugeMetricFamily(
            "kubedevice_checkpoint_age_seconds",
            "Seconds since the checkpoint was last written, at scrape time.",
            value=max(0.0, now - report.modified),
        )
    if s.stale is None:
        return
    stale_entries = GaugeMetricFamily(
        "kubedevice_checkpoint_stale_devices",
        "Checkpointed devices of pods PodResources no longer lists.",
        labels=["resource"],
    )
    per_resource = Counter(a.resource for a in s.stale)
    if s.view is not None:  # a 0 for every known resource: `== 0` and `> 0` both have a series to match
        for resource in set(s.view.allocatable or {}) | set(s.view.held_ids()):
            per_resource.setdefault(resource, 0)
    for resource in sorted(per_resource):
        stale_entries.add_metric([resource], per_resource[resource])
    yield stale_entries
    stale_info = GaugeMetricFamily(
        "kubedevice_checkpoint_stale_device_info",
        "A checkpointed device of a pod PodResources no longer lists (the checkpoint knows pods by UID).",
        labels=["pod_uid", "container", "resource", "device"],
    )
    for a in s.stale:
        stale_info.add_metric([a.pod_uid, a.container, a.resource, a.device], 1)
    yield stale_info


def _health(s: ScrapeSnapshot) -> Iterator[Metric]:
    errors = CounterMetricFamily(
        "kubedevice_exporter_errors",
        "Failed PodResources reads, by kind (missing, refused, rate_limited, timeout, permission, error).",
        labels=["kind"],
    )
    for kind, n in s.errors.items():
        errors.add_metric([kind.value], n)
    yield errors
    yield GaugeMetricFamily(
        "kubedevice_exporter_podresources_up", "1 when the last PodResources read succeeded.", value=int(s.up)
    )
    yield CounterMetricFamily(
        "kubedevice_exporter_refreshes", "Refreshes done, successful or not.", value=s.refreshes
    )
    if s.last_success is not None:
        yield GaugeMetricFamily(
            "kubedevice_exporter_last_success_timestamp_seconds",
            "When PodResources last answered.",
            value=s.last_success,
        )
    if s.last_duration is not None:
        yield GaugeMetricFamily(
            "kubedevice_exporter_refresh_duration_seconds",
            "How long the last refresh took (both PodResources calls and the checkpoint).",
            value=s.last_duration,
        )
