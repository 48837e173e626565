"""docs/kubelet-map.md names real code: every `module:qualified.name` on it imports and resolves."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

MAP = Path(__file__).resolve().parents[2] / "docs" / "kubelet-map.md"
REFERENCE = re.compile(r"`(kubedevice(?:\.\w+)+):([\w.]+)`")


def references() -> list[tuple[str, str]]:
    return sorted(set(REFERENCE.findall(MAP.read_text(encoding="utf-8"))))


def test_the_map_names_the_kubelet_functions_the_reader_looks_for() -> None:
    text = MAP.read_text(encoding="utf-8")
    for kubelet_name in (
        "writeCheckpoint",
        "readCheckpoint",
        "GetCapacity",
        "Allocate",
        "devicesToAllocate",
        "filterByAffinity",
        "GetDeviceRunContainerOptions",
        "callPreStartContainerIfNeeded",
        "runEndpoint",
        "markResourceUnhealthy",
        "genericDeviceUpdateCallback",
        "UpdateAllocatedDevices",
        "GetTopologyHints",
    ):
        assert f"`{kubelet_name}`" in text or f"`{kubelet_name} " in text or f" {kubelet_name}`" in text, (
            kubelet_name
        )
    assert len(references()) > 40


@pytest.mark.parametrize(("module", "qualname"), references())
def test_each_reference_exists(module: str, qualname: str) -> None:
    target: object = importlib.import_module(module)
    for part in qualname.split("."):
        assert hasattr(target, part), f"docs/kubelet-map.md names {module}:{qualname}, which no longer exists"
        target = getattr(target, part)
