"""The kubelet's device plugin metrics, on a registry owned by one manager or shared by the node daemon."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kubedevice.metrics import LazyMetrics

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram

#: Prometheus DefBuckets, as the kubelet uses.
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ManagerMetrics(LazyMetrics):
    """`kubelet_device_plugin_registration_total` and `kubelet_device_plugin_alloc_duration_seconds`."""

    @functools.cached_property
    def _made(self) -> tuple[Counter, Histogram]:
        from prometheus_client import Counter, Histogram  # on first use: see kubedevice.metrics

        registration_total = Counter(
            "kubelet_device_plugin_registration",
            "Cumulative number of device plugin registrations. Broken down by resource name.",
            ["resource_name"],
            registry=None,
        )
        alloc_duration_seconds = Histogram(
            "kubelet_device_plugin_alloc_duration_seconds",
            "Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
            ["resource_name"],
            buckets=DEF_BUCKETS,
            registry=None,
        )
        return registration_total, alloc_duration_seconds

    def families(self) -> tuple[Counter, Histogram]:
        return self._made

    @property
    def registration_total(self) -> Counter:
        return self._made[0]

    @property
    def alloc_duration_seconds(self) -> Histogram:
        return self._made[1]
