"""Metric holders whose families are made on first use, registered before or after they are counted."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from kubedevice.manager.metrics import ManagerMetrics
from kubedevice.topology.metrics import TopologyMetrics


def test_counts_made_before_registering_are_exposed_once_registered() -> None:
    metrics = ManagerMetrics()
    metrics.registration_total.labels(resource_name="example.com/gpu").inc()
    registry = CollectorRegistry()
    metrics.register(registry)
    assert metrics.registry is registry
    sample = registry.get_sample_value(
        "kubelet_device_plugin_registration_total", {"resource_name": "example.com/gpu"}
    )
    assert sample == 1.0


def test_families_are_exposed_before_anything_is_counted() -> None:
    registry = CollectorRegistry()
    TopologyMetrics(registry)
    text = generate_latest(registry).decode()
    for name in (
        "kubelet_topology_manager_admission_requests_total",
        "kubelet_topology_manager_admission_errors_total",
        "kubelet_topology_manager_admission_duration_ms",
        "kubelet_admission_rejections_total",
        "kubelet_container_aligned_compute_resources_count",
    ):
        assert f"# HELP {name} " in text, name


def test_one_holder_on_two_registries_counts_once() -> None:
    own, shared = CollectorRegistry(), CollectorRegistry()
    metrics = TopologyMetrics(own)
    metrics.register(shared)
    metrics.admission_requests.inc()
    metrics.aligned.inc("container", "numa_node")
    assert metrics.registry is own
    for registry in (own, shared):
        assert registry.get_sample_value("kubelet_topology_manager_admission_requests_total") == 1.0
        labels = {"scope": "container", "boundary": "numa_node"}
        assert registry.get_sample_value("kubelet_container_aligned_compute_resources_count", labels) == 1.0


def test_a_holder_without_a_registry_makes_its_own_on_first_use() -> None:
    first, second = ManagerMetrics(), ManagerMetrics()
    first.alloc_duration_seconds.labels(resource_name="r").observe(0.01)
    assert first.registry is not second.registry  # never the global default registry
    assert (
        first.registry.get_sample_value(
            "kubelet_device_plugin_alloc_duration_seconds_count", {"resource_name": "r"}
        )
        == 1.0
    )
    assert (
        second.registry.get_sample_value(
            "kubelet_device_plugin_alloc_duration_seconds_count", {"resource_name": "r"}
        )
        is None
    )
