"""The daemon's own metrics, beside the manager's and PodResources' on the one registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

#: upstream's buckets of `pod_deletion_duration_seconds` (5 ms to 4 min).
_DELETION_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240)


class NodeMetrics:
    """`kubedevice_node_pods{phase}`, `kubedevice_node_admissions_total`, `..._admission_failures_total`,
    and the device taint eviction controller's, under upstream's names."""

    def __init__(self, registry: CollectorRegistry, pods_by_phase: Callable[[], Mapping[Any, int]]) -> None:
        self._pods_by_phase = pods_by_phase
        self.admissions = Counter(
            "kubedevice_node_admissions",
            "Pods admitted (devices allocated, containers started).",
            registry=registry,
        )
        self.admission_failures = Counter(
            "kubedevice_node_admission_failures",
            "Pods that failed admission (UnexpectedAdmissionError).",
            registry=registry,
        )
        self.pod_deletions = Counter(
            "device_taint_eviction_controller_pod_deletions",
            "Total number of Pods deleted by DeviceTaintEvictionController since its start.",
            registry=registry,
        )
        self.pod_deletion_duration = Histogram(
            "device_taint_eviction_controller_pod_deletion_duration_seconds",
            "Latency, in seconds, between the time when a device taint effect has been activated and a "
            "Pod's deletion via DeviceTaintEvictionController.",
            buckets=_DELETION_BUCKETS,
            registry=registry,
        )
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "kubedevice_node_pods", "Pods known to the node, by phase.", labels=["phase"]
        )
        for phase, count in self._pods_by_phase().items():
            gauge.add_metric([phase], count)
        yield gauge
