"""The `top` frame's layout: 16 devices per resource fit 80 columns, more are summarised per NUMA node."""

from __future__ import annotations

from rich.console import Console

from kubedevice.inventory import HeldDevice, PodResourcesView
from kubedevice.top.frame import render
from kubedevice.top.model import DeviceCell, HeldBy, ResourceRow, TopView, from_podresources, from_status

GPU = "example.com/gpu"


def _text(view: TopView) -> list[str]:
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render(view))
    console.file.close()
    return [line.rstrip() for line in console.export_text().splitlines()]


def _view(count: int, holders: int, numa_nodes: int) -> TopView:
    cells = []
    held = []
    for i in range(count):
        pod = f"default/pod-{i}" if i < holders else None
        healthy = i % 5 != 4  # every fifth device has failed, held or not
        cells.append(DeviceCell(f"gpu-{i}", (i % numa_nodes,), healthy, (pod,) if pod else ()))
        if pod:
            held.append(HeldBy(pod, "main", GPU, (f"gpu-{i}",)))
    return TopView("test node", (ResourceRow(GPU, tuple(cells)),), tuple(held), health_known=True)


def test_sixteen_devices_held_by_sixteen_pods_fit_80_columns_one_row_per_numa_node() -> None:
    lines = _text(_view(16, 16, 1))
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    [row] = [line for line in lines if line.startswith("  NUMA 0")]
    marks = row.split()[2:]
    # Pods are numbered in natural order of their names: pod-0 is 1, pod-10 is 11.
    assert marks == ["1", "2", "3", "4", "!5", "6", "7", "8", "9", "!10", "11", "12", "13", "14", "!15", "16"]
    assert lines[2] == f"{GPU}  16 devices: 16 held (3 unhealthy), 0 free, 0 unhealthy"


def test_more_than_sixteen_devices_are_summarised_per_numa_node() -> None:
    lines = _text(_view(40, 10, 2))
    assert all(len(line) <= 80 for line in lines)
    assert "  NUMA 0  20 devices: 5 held (1 unhealthy), 12 free, 3 unhealthy" in lines
    assert "  NUMA 1  20 devices: 5 held (1 unhealthy), 12 free, 3 unhealthy" in lines
    assert f"{GPU}  40 devices: 10 held (2 unhealthy), 24 free, 6 unhealthy" in lines
    assert "  unhealthy: gpu-4, gpu-9, gpu-14, gpu-19, gpu-24, gpu-29, and 2 more" in lines


def test_a_node_without_resources_says_so() -> None:
    lines = _text(TopView("test node", (), (), health_known=True))
    assert "no device-plugin resources or DRA drivers registered" in lines
    assert "node: 0 devices: 0 held, 0 free, 0 unhealthy; 0 pods" in lines


def test_a_resource_whose_plugin_is_gone_says_so_under_its_counts() -> None:
    node = {
        "resources": {
            "example.com/nic": {
                "healthy": [],
                "unhealthy": ["nic-0", "nic-1"],
                "numaNodes": {},
                "endpoint": "stopped",
                "stoppedSeconds": 12.4,
            }
        }
    }
    pods = {
        "pods": [
            {
                "namespace": "demo",
                "name": "web",
                "containers": [{"name": "main", "devices": {"example.com/nic": ["nic-0"]}}],
            }
        ],
        "manifestErrors": [{"file": "bad.yaml", "error": "not a Pod"}],
    }
    lines = _text(from_status("test node", node, pods))
    assert lines[2:6] == [
        "example.com/nic  2 devices: 1 held (1 unhealthy), 0 free, 1 unhealthy",
        "  plugin gone for 12s: its devices count as unhealthy",
        "  no NUMA   !1   ✗",
        "  unhealthy: nic-0, nic-1",
    ]
    assert "node: 2 devices: 1 held (1 unhealthy), 0 free, 1 unhealthy; 1 pod" in lines


def test_a_bare_socket_without_get_allocatable_shows_held_devices_of_unknown_health() -> None:
    held = (
        HeldDevice("ml", "train", "main", GPU, "gpu-1", (1,)),
        HeldDevice("ml", "train", "main", GPU, "gpu-0", (0,)),
    )
    view = from_podresources("PodResources at S", PodResourcesView(held, None))
    lines = _text(view)
    assert lines[0] == "PodResources at S (no GetAllocatableResources: held devices only)"
    assert f"{GPU}  2 devices listed: 2 held (2 health unknown), 0 free" in lines
    assert "  NUMA 0   ?1" in lines and "  NUMA 1   ?1" in lines


def test_one_device_is_counted_in_the_singular() -> None:
    held = (HeldDevice("ml", "train", "main", GPU, "gpu-0", (0,)),)
    lines = _text(from_podresources("PodResources at S", PodResourcesView(held, None)))
    assert f"{GPU}  1 device listed: 1 held (1 health unknown), 0 free" in lines
    assert not any("1 devices" in line or "1 pods" in line for line in lines), lines
