"""The kubelet's device plugin metrics, on a registry owned by one manager."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

#: Prometheus DefBuckets, as the kubelet uses.
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ManagerMetrics:
    """`kubelet_device_plugin_registration_total` and `kubelet_device_plugin_alloc_duration_seconds`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # Never the global default registry: several managers may live in one process.
        self.registry = registry if registry is not None else CollectorRegistry()
        self.registration_total = Counter(
            "kubelet_device_plugin_registration",
            "Cumulative number of device plugin registrations. Broken down by resource name.",
            ["resource_name"],
            registry=self.registry,
        )
        self.alloc_duration_seconds = Histogram(
            "kubelet_device_plugin_alloc_duration_seconds",
            "Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
            ["resource_name"],
            buckets=DEF_BUCKETS,
            registry=self.registry,
        )
