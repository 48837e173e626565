"""Names and paths of the SDK's DRA face, and the new Device fields."""

from __future__ import annotations

import base64
import copy
import hashlib
from pathlib import Path

import pytest

from kubedevice.plugin import Device
from kubedevice.plugin.dra.paths import (
    DRAPaths,
    registration_socket_name,
    resolve_kubelet_dir,
)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def test_rolling_update_registration_socket_names() -> None:
    registry = Path("/var/lib/kubelet/plugins_registry")
    assert registration_socket_name(registry, "gpu.example.com", "") == "gpu.example.com-reg.sock"
    uid = "7f5c0ad4-8a7e-4d35-9c55-0a3c2e1b9f00"
    assert registration_socket_name(registry, "gpu.example.com", uid) == f"gpu.example.com-{uid}-reg.sock"
    deep = Path("/" + "d" * 50)
    hashed = b64(hashlib.sha256(uid.encode()).digest()[:8])
    assert registration_socket_name(deep, "gpu.example.com", uid) == f"gpu.example.com-{hashed}-reg.sock"
    deeper = Path("/" + "d" * 75)
    both = b64(hashlib.sha256(f"gpu.example.com\0{uid}".encode()).digest()[:16])
    assert registration_socket_name(deeper, "gpu.example.com", uid) == f"dra-{both}-reg.sock"


def test_paths_come_from_one_kubelet_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEDEVICE_KUBELET_DIR", raising=False)
    assert resolve_kubelet_dir(None) == Path("/var/lib/kubelet")
    monkeypatch.setenv("KUBEDEVICE_KUBELET_DIR", "/k")
    assert resolve_kubelet_dir(None) == Path("/k")
    assert resolve_kubelet_dir("/arg") == Path("/arg")
    paths = DRAPaths(Path("/k"), "gpu.example.com", "B")
    assert (paths.registration_socket, paths.dra_socket, paths.state_file, paths.lock_file) == (
        Path("/k/plugins_registry/gpu.example.com-B-reg.sock"),
        Path("/k/plugins/gpu.example.com/dra-B.sock"),
        Path("/k/plugins/gpu.example.com/kubedevice-dra-state.json"),
        Path("/k/plugins/gpu.example.com/serialize.lock"),
    )


def test_device_attributes_capacity_and_face() -> None:
    device = Device("gpu-0", attributes={"model": "x1", "index": 0}, capacity={"memory": "16Gi"}, api="dra")
    assert device == Device(
        "gpu-0", attributes={"model": "x1", "index": 0}, capacity={"memory": "16Gi"}, api="dra"
    )
    assert device != Device(
        "gpu-0", attributes={"model": "x2", "index": 0}, capacity={"memory": "16Gi"}, api="dra"
    )
    assert len({device, device}) == 1
    with pytest.raises(ValueError, match="attribute 'model' must be a str, int or bool"):
        Device("gpu-0", attributes={"model": 1.5})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="capacity entries must map a name to a quantity string"):
        Device("gpu-0", capacity={"memory": 16})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match='api must be "device-plugin" or "dra"'):
        Device("gpu-0", api="both")  # type: ignore[arg-type]


def test_device_keeps_its_own_copy_and_copies_deeply() -> None:
    attributes: dict[str, str | int | bool] = {"model": "x1"}
    device = Device("gpu-0", attributes=attributes)
    attributes["model"] = "x2"
    assert device.attributes == {"model": "x1"}
    assert copy.deepcopy(device) == device
