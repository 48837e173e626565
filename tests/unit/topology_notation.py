"""The notation of the topology manager's test vectors: `{0,1}T`, `nilF`, distance tables D4 and D8."""

from __future__ import annotations

from kubedevice.topology import MachineTopology, NUMAInfo, TopologyHint
from kubedevice.topology.numa_info import MachineNode

D4 = ((10, 11, 12, 12), (11, 10, 12, 12), (12, 12, 10, 11), (12, 12, 11, 10))
D8 = (
    *((*row, 30, 30, 30, 30) for row in D4),
    *((30, 30, 30, 30, *row) for row in D4[:3]),
    (30, 30, 30, 30, 12, 12, 13, 10),
)


def h(text: str) -> TopologyHint:
    """`{0,2}T` or `nilF`."""
    mask, preferred = text[:-1], text[-1] == "T"
    assert text[-1] in "TF", text
    if mask == "nil":
        return TopologyHint(None, preferred)
    nodes = tuple(int(x) for x in mask.strip("{}").split(",") if x)
    return TopologyHint.of(nodes, preferred)


def hs(*texts: str) -> list[TopologyHint]:
    return [h(t) for t in texts]


def machine(count: int, distances: tuple[tuple[int, ...], ...] | None = None) -> MachineTopology:
    return MachineTopology(
        tuple(MachineNode(i, distances[i] if distances else None) for i in range(count)), "test"
    )


def numa(count: int, distances: tuple[tuple[int, ...], ...] | None = None) -> NUMAInfo:
    return NUMAInfo.from_machine(machine(count, distances), prefer_closest=distances is not None)
