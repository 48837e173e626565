"""The claims table and the DRA drivers table: a generated claim names its pod, a claim restored from the
checkpoint reads `restored`, a driver's slices without a registration are shown, an empty node says so."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from kubedevice.statusapi.tables import print_claims, print_dra_drivers

P = "0b7e6a52-0000-4000-8000-00000000000p"


def _text(print_it: Any, data: dict[str, Any]) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    print_it(console, data)
    console.file.close()
    return console.export_text()


def _row(text: str, start: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.startswith(f"│ {start}")]
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_claims_generated_for_a_pod_and_restored_from_the_checkpoint() -> None:
    claim = {
        "namespace": "default",
        "name": "p-gpu-x7k2q",
        "uid": "u1",
        "generatedFor": P,
        "extendedFor": None,
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "d", "pool": "n", "device": "g0"}]}
        },
        "allocatedBy": "daemon",
        "reservedFor": [{"resource": "pods", "name": "p", "uid": P}],
        "reservedBy": "daemon",
        "cached": True,
        "prepared": False,
        "pods": [{"uid": P, "pod": "default/p"}],
        "devices": [],
        "cdiDevices": ["d/gpu=g0"],
    }
    text = _text(print_claims, {"claims": [claim]})
    assert _row(text, "default/p-gpu-x7k2q") == [
        "default/p-gpu-x7k2q",
        "u1",
        "gpu: d/n/g0",
        "p (by the daemon)",
        "restored",
        "d/gpu=g0",
        "default/p",
    ]
    assert "(for pod default/p)" in text
    assert "(by the daemon)" in text


def test_no_claims_says_so() -> None:
    text = _text(print_claims, {"claims": []})
    assert "no ResourceClaims: no claim document, template or DRA-backed pod" in text


def test_dra_drivers_registered_or_only_published() -> None:
    node = {
        "nodeName": "node-1",
        "draDrivers": {
            "gpu.example.com": {
                "endpoints": [{"endpoint": "/r/plugins/gpu.example.com/dra.sock", "connected": False}],
                "wipePending": True,
                "devices": ["node-1/gpu-0", "node-1/gpu-1"],
            }
        },
        "unregisteredSliceDrivers": {"nic.example.com": {"devices": ["a/eth0", "b/eth1"]}},
    }
    text = _text(print_dra_drivers, node)
    assert _row(text, "gpu.example.com") == [
        "gpu.example.com",
        "/r/plugins/gpu.example.com/dra.sock",
        "0 of 1, slices wiped soon",
        "2: gpu-0, gpu-1",
        "node-1",
    ]
    assert _row(text, "nic.example.com") == [
        "nic.example.com",
        "not registered",
        "-",
        "2: a/eth0, b/eth1",
        "a, b",
    ]
    assert "DRA node name: node-1" in text
    # A node without DRA prints nothing of it.
    assert _text(print_dra_drivers, {"draDrivers": {}, "unregisteredSliceDrivers": {}}).strip() == ""
