"""The daemon's own metrics, beside the manager's and PodResources' on the one registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric


class NodeMetrics:
    """`kubedevice_node_pods{phase}`, `kubedevice_node_admissions_total`, `..._admission_failures_total`."""

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
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "kubedevice_node_pods", "Pods known to the node, by phase.", labels=["phase"]
        )
        for phase, count in self._pods_by_phase().items():
            gauge.add_metric([phase], count)
        yield gauge
