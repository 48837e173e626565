"""Reading an exporter's Prometheus text in tests: samples by name, and the device-to-pod series."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[str, list[tuple[dict[str, str], float]]]
DEVICE_KEYS = ("namespace", "pod", "container", "resource", "device", "numa_node")


def parse_samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def sample_value(samples: Samples, name: str, **labels: str) -> float | None:
    return next((v for got, v in samples.get(name, []) if got == labels), None)


def held_devices(samples: Samples) -> set[tuple[str, ...]]:
    """kubedevice_pod_device_info as (namespace, pod, container, resource, device, numa_node) tuples."""
    return {
        tuple(labels[k] for k in DEVICE_KEYS)
        for labels, value in samples.get("kubedevice_pod_device_info", [])
        if value == 1
    }
