"""The exporter's DRA families: the devices of the ResourceClaims containers use, from PodResources'
`dynamic_resources`, each device and each CDI ID counted once (kubedevice.inventory undoes the kubelet's
repeats). PodResources says nothing of the DRA devices no claim holds, so there is no free count here."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from kubedevice.inventory import PodResourcesView

DRA_DEVICE_LABELS = ["namespace", "pod", "container", "claim", "driver", "pool", "device"]


def dra_families(view: PodResourcesView) -> Iterator[Metric]:
    info = GaugeMetricFamily(
        "kubedevice_pod_dra_device_info",
        "A device of a DRA ResourceClaim a container uses, as PodResources List reports it "
        "(dynamic_resources); the claim is in the pod's namespace.",
        labels=DRA_DEVICE_LABELS,
    )
    devices: dict[tuple[str, str], set[str]] = {}
    cdi: dict[tuple[str, str, str], set[str]] = {}
    for d in view.claim_devices:
        info.add_metric([d.namespace, d.pod, d.container, d.claim, d.driver, d.pool, d.device], 1)
        devices.setdefault((d.driver, d.pool), set()).add(d.device)
        cdi.setdefault((d.namespace, d.claim, d.driver), set()).update(d.cdi_devices)
    yield info
    allocated = GaugeMetricFamily(
        "kubedevice_dra_allocated_devices",
        "Devices of the DRA driver's pool held by the claims of listed containers (a shared claim's "
        "device counts once).",
        labels=["driver", "pool"],
    )
    for (driver, pool), names in sorted(devices.items()):
        allocated.add_metric([driver, pool], len(names))
    yield allocated
    cdi_devices = GaugeMetricFamily(
        "kubedevice_dra_claim_cdi_devices",
        "CDI devices a DRA driver prepared for a claim, each CDI ID once (the kubelet's PodResources "
        "repeats earlier devices' IDs on later ones).",
        labels=["namespace", "claim", "driver"],
    )
    for (namespace, claim, driver), ids in sorted(cdi.items()):
        cdi_devices.add_metric([namespace, claim, driver], len(ids))
    yield cdi_devices
