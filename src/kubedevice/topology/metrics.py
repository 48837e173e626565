"""The topology manager's metrics with the kubelet's names, on a registry the caller owns."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kubedevice.metrics import LazyMetrics

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram
    from prometheus_client.core import Metric

#: 0.05 ms doubling 15 times (0.05 ... 819.2), as the kubelet's admission duration histogram.
DURATION_MS_BUCKETS = tuple(0.05 * 2**k for k in range(15))
ALIGNED_METRIC = "kubelet_container_aligned_compute_resources_count"


class _AlignedCount:
    """`kubelet_container_aligned_compute_resources_count{scope,boundary}`, a counter without `_total`.

    prometheus_client appends `_total` to every counter name, so this one is exposed as an untyped family
    whose samples keep the kubelet's exact name.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], float] = {}

    def inc(self, scope: str, boundary: str) -> None:
        with self._lock:
            self._values[(scope, boundary)] = self._values.get((scope, boundary), 0.0) + 1

    def value(self, scope: str, boundary: str) -> float:
        with self._lock:
            return self._values.get((scope, boundary), 0.0)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import Metric  # on first use: see kubedevice.metrics

        family = Metric(
            ALIGNED_METRIC,
            "Cumulative number of aligned compute resources allocated to containers by alignment type.",
            "unknown",
        )
        with self._lock:
            for (scope, boundary), value in sorted(self._values.items()):
                family.add_sample(ALIGNED_METRIC, {"boundary": boundary, "scope": scope}, value)
        yield family


class TopologyMetrics(LazyMetrics):
    """Admission requests, errors and duration, aligned containers/pods and admission rejections by reason."""

    # Each family is made on first use (prometheus_client is imported then: see kubedevice.metrics).
    @functools.cached_property
    def admission_requests(self) -> Counter:
        from prometheus_client import Counter

        return Counter(
            "kubelet_topology_manager_admission_requests",
            "Number of admission requests where resources have to be aligned.",
            registry=None,
        )

    @functools.cached_property
    def admission_errors(self) -> Counter:
        from prometheus_client import Counter

        return Counter(
            "kubelet_topology_manager_admission_errors",
            "Number of admission request failures where resources could not be aligned.",
            registry=None,
        )

    @functools.cached_property
    def admission_duration_ms(self) -> Histogram:
        from prometheus_client import Histogram

        return Histogram(
            "kubelet_topology_manager_admission_duration_ms",
            "Duration in milliseconds to serve a pod admission request.",
            buckets=DURATION_MS_BUCKETS,
            registry=None,
        )

    @functools.cached_property
    def admission_rejections(self) -> Counter:
        from prometheus_client import Counter

        return Counter(
            "kubelet_admission_rejections",
            "Cumulative number pod admission rejections by the Kubelet.",
            ["reason"],
            registry=None,
        )

    @functools.cached_property
    def aligned(self) -> _AlignedCount:
        return _AlignedCount()

    def families(self) -> tuple[Counter, Counter, Histogram, Counter, _AlignedCount]:
        return (
            self.admission_requests,
            self.admission_errors,
            self.admission_duration_ms,
            self.admission_rejections,
            self.aligned,
        )
