"""The kubelet's DRA metrics (`pkg/kubelet/metrics`), on a registry owned by one manager or shared."""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from kubedevice.metrics import LazyMetrics

if TYPE_CHECKING:
    from prometheus_client import Histogram


def exponential_buckets_range(low: float, high: float, count: int) -> tuple[float, ...]:
    """Go's `metrics.ExponentialBucketsRange`: `count` buckets from `low` to `high`, each computed as
    low * growth^i (not by repeated multiplication), so the bounds print as the kubelet's do."""
    if count < 1 or low <= 0 or high <= low:
        raise ValueError(f"bad exponential bucket range: {low}, {high}, {count}")
    growth = math.pow(high / low, 1.0 / (count - 1)) if count > 1 else 1.0
    return tuple(low * math.pow(growth, i) for i in range(count))


#: ExponentialBucketsRange(0.1, 40, 15): from 100 ms to 40 s.
DRA_BUCKETS = exponential_buckets_range(0.1, 40, 15)


class DRAMetrics(LazyMetrics):
    """`dra_operations_duration_seconds` and `dra_grpc_operations_duration_seconds` (no namespace)."""

    @functools.cached_property
    def operations(self) -> Histogram:
        from prometheus_client import Histogram

        return Histogram(
            "dra_operations_duration_seconds",
            "Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a "
            "pod when the pod starts or stops. Identified by the name of the operation (PrepareResources "
            "or UnprepareResources) and separated by the success of the operation. The number of failed "
            "operations is provided through the histogram's overall count.",
            ["operation_name", "is_error"],
            buckets=DRA_BUCKETS,
            registry=None,
        )

    @functools.cached_property
    def grpc_operations(self) -> Histogram:
        from prometheus_client import Histogram

        return Histogram(
            "dra_grpc_operations_duration_seconds",
            "Duration in seconds of the DRA gRPC operations",
            ["driver_name", "method_name", "grpc_status_code"],
            buckets=DRA_BUCKETS,
            registry=None,
        )

    def families(self) -> tuple[Histogram, Histogram]:
        return self.operations, self.grpc_operations
