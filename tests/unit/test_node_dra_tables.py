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
