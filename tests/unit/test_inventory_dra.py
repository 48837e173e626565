"""DRA devices in PodResources as kubedevice's own readers count them: the kubelet's repeats (the same claim
named twice by one container, the CDI IDs of a driver's earlier devices repeated on later ones) counted
once, in the inventory, the exporter's families and `top`'s frame."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from rich.console import Console

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.exporter.collector import SnapshotCollector
from kubedevice.exporter.refresh import ScrapeSnapshot
from kubedevice.inventory.model import view_of
from kubedevice.top.frame import render
from kubedevice.top.model import TopView, from_podresources, from_status
from tests.prometheus_text import parse_samples, sample_value

DRIVER = "x.com"


def _resource(device: str, *cdi: str, driver: str = DRIVER) -> pr.ClaimResource:
    return pr.ClaimResource(
        driver_name=driver,
        pool_name="node-1",
        device_name=device,
        cdi_devices=[pr.CDIDevice(name=c) for c in cdi],
    )


def _answer() -> pr.ListPodResourcesResponse:
    """Scenario 24's claim (d1 `x.com/a=1`, d2 `x.com/a=1, x.com/a=2`) used by pods p and q, with p's
    container naming it twice (two requests); q's container has a second claim of another driver."""
    quirk = pr.DynamicResource(
        claim_name="c1",
        claim_namespace="default",
        claim_resources=[_resource("d1", "x.com/a=1"), _resource("d2", "x.com/a=1", "x.com/a=2")],
    )
    other = pr.DynamicResource(
        claim_name="c2",
        claim_namespace="default",
        claim_resources=[_resource("nic-0", "y.com/nic=nic-0", driver="y.com")],
    )
    return pr.ListPodResourcesResponse(
        pod_resources=[
            pr.PodResources(
                name="p",
                namespace="default",
                containers=[pr.ContainerResources(name="main", dynamic_resources=[quirk, quirk])],
            ),
            pr.PodResources(
                name="q",
                namespace="default",
                containers=[pr.ContainerResources(name="main", dynamic_resources=[quirk, other])],
            ),
        ]
    )


def test_each_device_and_cdi_id_once_per_claim_and_driver() -> None:
    view = view_of(_answer(), None)
    got = [(d.pod, d.claim, d.driver, d.device, d.cdi_devices) for d in view.claim_devices]
    assert got == [
        ("p", "c1", DRIVER, "d1", ("x.com/a=1",)),
        ("p", "c1", DRIVER, "d2", ("x.com/a=2",)),
        ("q", "c1", DRIVER, "d1", ("x.com/a=1",)),
        ("q", "c1", DRIVER, "d2", ("x.com/a=2",)),
        ("q", "c2", "y.com", "nic-0", ("y.com/nic=nic-0",)),
    ]
    assert view.held == ()


def test_exporter_families_count_two_cdi_ids_not_three() -> None:
    view = view_of(_answer(), pr.AllocatableResourcesResponse())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: ScrapeSnapshot(view=view, up=True)))
    samples = parse_samples(generate_latest(registry).decode())
    assert (
        sample_value(
            samples, "kubedevice_dra_claim_cdi_devices", namespace="default", claim="c1", driver=DRIVER
        )
        == 2
    )
    assert (
        sample_value(
            samples, "kubedevice_dra_claim_cdi_devices", namespace="default", claim="c2", driver="y.com"
        )
        == 1
    )
    # The shared claim's two devices count once each, though two pods use them.
    assert sample_value(samples, "kubedevice_dra_allocated_devices", driver=DRIVER, pool="node-1") == 2
    info = {
        (labels["pod"], labels["claim"], labels["device"])
        for labels, value in samples["kubedevice_pod_dra_device_info"]
        if value == 1
    }
    assert info == {
        ("p", "c1", "d1"),
        ("p", "c1", "d2"),
        ("q", "c1", "d1"),
        ("q", "c1", "d2"),
        ("q", "c2", "nic-0"),
    }


def _text(view: TopView) -> list[str]:
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render(view))
    console.file.close()
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_top_from_podresources_shows_the_claims_devices() -> None:
    lines = _text(
        from_podresources("PodResources at s", view_of(_answer(), pr.AllocatableResourcesResponse()))
    )
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert f"{DRIVER} (DRA)  2 devices listed: 2 held, 0 free" in lines
    # Both pods hold both devices of the shared claim: pods 1 and 2 in each cell.
    assert "  no NUMA  1,2 1,2" in lines
    assert "1  default/p  main       x.com: node-1/d1,node-1/d2 (claim c1)" in lines


def test_top_from_the_status_api_shows_free_and_held_driver_devices() -> None:
    node = {
        "resources": {},
        "draDrivers": {DRIVER: {"endpoints": [], "devices": ["node-1/d1", "node-1/d2", "node-1/d3"]}},
        "unregisteredSliceDrivers": {"y.com": {"devices": ["node-1/nic-0"]}},
    }
    claim = {
        "claim": "default/c1",
        "devices": [{"driver": DRIVER, "pool": "node-1", "device": "d2"}],
        "cdiDevices": ["x.com/a=2"],
    }
    pods = {
        "pods": [
            {
                "namespace": "default",
                "name": "p",
                "containers": [{"name": "main", "devices": {}, "claims": [claim]}],
            }
        ]
    }
    lines = _text(from_status("node daemon", node, pods))
    assert f"{DRIVER} (DRA)  3 devices: 1 held, 2 free, 0 unhealthy" in lines
    assert "  no NUMA    ·   1   ·" in lines
    assert "y.com (DRA)  1 device: 0 held, 1 free, 0 unhealthy" in lines
    assert "  DRA driver not registered" in lines
    assert "1  default/p  main       x.com: node-1/d2 (claim c1)" in lines
