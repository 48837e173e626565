"""`kubedevice.testing`: test a device plugin the way the kubelet will use it, from pytest.

Installed with kubedevice and loaded by pytest through the `kubedevice` plugin (`pip install
'kubedevice[testing]'` brings pytest and pytest-asyncio). Fixtures:

* `kubelet` (:class:`StandInKubelet`): a stand-in kubelet on a temporary plugin folder, in the test's loop;
* `dra_kubelet` (:class:`StandInDRAKubelet`): the node side of DRA on a temporary kubelet folder, in the
  test's loop, for DRA drivers;
* `node` (:class:`Node`): the real node daemon as a process under a temporary root;

and :func:`run_conformance`, the conformance checker on a command or a DevicePlugin object.
Nothing here imports pytest; the names load on first use, so pytest's start stays fast. Every failure is
an AssertionError of one line, and pytest hides the kit's own frames (`__tracebackhide__`), so the
report points at the line of the test that waited.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubedevice.testing.conformance import ConformanceReport, run_conformance
    from kubedevice.testing.dra_kubelet import StandInDRAKubelet
    from kubedevice.testing.kubelet import PluginCallFailed, Registration, StandInKubelet
    from kubedevice.testing.node import Node, NodeStatus, PodStatus

_WHERE = {
    "ConformanceReport": "conformance",
    "run_conformance": "conformance",
    "StandInDRAKubelet": "dra_kubelet",
    "PluginCallFailed": "kubelet",
    "Registration": "kubelet",
    "StandInKubelet": "kubelet",
    "Node": "node",
    "NodeStatus": "node",
    "PodStatus": "node",
}

__all__ = [
    "ConformanceReport",
    "Node",
    "NodeStatus",
    "PluginCallFailed",
    "PodStatus",
    "Registration",
    "StandInDRAKubelet",
    "StandInKubelet",
    "run_conformance",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
