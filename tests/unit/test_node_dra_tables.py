"""The pods table with DRA: a terminating pod reads Terminating, a container's claims show their devices."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from kubedevice.statusapi.tables import print_pods


def _pod(name: str, phase: str, *, terminating: bool, claims: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "namespace": "default",
        "name": name,
        "phase": phase,
        "terminating": terminating,
        "reason": "",
        "message": "",
        "containers": [{"name": "main", "devices": {"example.com/gpu": ["fake-1"]}, "claims": claims}],
    }


def test_terminating_pods_and_claim_devices() -> None:
    claim = {
        "claim": "default/c1",
        "devices": [
            {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
            {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-1"},
        ],
        "cdiDevices": [],
    }
    data = {
        "pods": [
            _pod("p", "Running", terminating=True, claims=[claim]),
            _pod("q", "Running", terminating=False, claims=[]),
        ],
        "manifestErrors": [],
    }
    console = Console(width=200, record=True)
    print_pods(console, data)
    rows = [line for line in console.export_text().splitlines() if "default/" in line]
    assert "Terminating" in rows[0] and "Terminating" not in rows[1] and "Running" in rows[1]
    assert "example.com/gpu: fake-1; claim default/c1: gpu.example.com gpu-0, gpu-1" in rows[0]
    assert rows[1].count("claim") == 0


def test_health_column_and_the_devices_that_are_not_healthy() -> None:
    def container(name: str, statuses: list[dict[str, Any]]) -> dict[str, Any]:
        return {"name": name, "devices": {}, "claims": [], "allocatedResourcesStatus": statuses}

    sick = [
        {"name": "example.com/gpu", "resources": [{"resourceID": "fake-0", "health": "Healthy"}]},
        {
            "name": "claim:gpu",
            "resources": [
                {"resourceID": "gpu.example.com/gpu=gpu-1", "health": "Unhealthy", "message": "ECC errors"},
                {"resourceID": "gpu.example.com/node-1/gpu-2", "health": "Unknown"},
            ],
        },
    ]
    well = [{"name": "claim:nic", "resources": [{"resourceID": "n/nic=eth0", "health": "Healthy"}]}]
    pod = _pod("p", "Running", terminating=False, claims=[])
    pod["containers"] = [container("main", sick), container("side", well), container("none", [])]
    console = Console(width=200, record=True)
    print_pods(console, {"pods": [pod], "manifestErrors": []})
    text = console.export_text()
    rows = {
        line.split("│")[3].strip(): line.split("│")[5].strip() for line in text.splitlines() if "│" in line
    }
    assert rows == {"main": "1 unhealthy, 1 unknown of 3", "side": "healthy", "none": "-"}
    notes = [line for line in text.splitlines() if line.startswith("default/p ")]
    assert notes == [
        "default/p main: gpu.example.com/gpu=gpu-1 Unhealthy (ECC errors); "
        "gpu.example.com/node-1/gpu-2 Unknown"
    ]
