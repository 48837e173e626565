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

    # Each family is made on first use (prometheus_client is imported then: see kubedevice.metrics).
    @functools.cached_property
    def registration_total(self) -> Counter:
        from prometheus_client import Counter

        return Counter(
            "kubelet_device_plugin_registration",
            "Cumulative number of device plugin registrations. Broken down by resource name.",
            ["resource_name"],
            registry=None,
        )

    @functools.cached_property
    def alloc_duration_seconds(self) -> Histogram:
        from prometheus_client import Histogram

        return Histogram(
            "kubelet_device_plugin_alloc_duration_seconds",
            "Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
            ["resource_name"],
            buckets=DEF_BUCKETS,
            registry=None,
        )

    def families(self) -> tuple[Counter, Histogram]:
        return self.registration_total, self.alloc_duration_seconds
