"""The node's NUMA layout: node IDs (the machine's order) and, for prefer-closest, their distance rows.

Read from sysfs the way cadvisor does (one `node<N>` folder per node, in lexical order, `distance` files) or
made up as N nodes with distance 10 to themselves and 20 to the others, for tests and demos.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kubedevice.topology.bitmask import MAX_BIT, BitMask, narrowest

SYS_NODE_DIR = Path("/sys/devices/system/node")
SYS_CPU_DIR = Path("/sys/devices/system/cpu")
LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20
_NODE_DIR = re.compile(r"node(\d+)")


class NUMAInfoError(ValueError):
    """The NUMA layout cannot be used as configured."""


@dataclass(frozen=True, slots=True)
class MachineNode:
    """One node as the machine reports it; `distances` None when its row could not be read."""

    id: int
    distances: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class MachineTopology:
    nodes: tuple[MachineNode, ...]
    #: Where the layout came from, for status pages ("sysfs", "sockets", "--numa-nodes 2").
    source: str
    #: Rows that could not be read, with why (cadvisor logs these as warnings).
    warnings: tuple[str, ...] = ()


def synthetic_topology(count: int) -> MachineTopology:
    """`count` nodes 0..count-1, distance 10 local and 20 remote."""
    if count < 1:
        raise NUMAInfoError(f"the NUMA node count must be at least 1, got {count}")
    rows = [
        MachineNode(i, tuple(LOCAL_DISTANCE if i == j else REMOTE_DISTANCE for j in range(count)))
        for i in range(count)
    ]
    return MachineTopology(tuple(rows), f"--numa-nodes {count}")


def read_topology(node_dir: Path = SYS_NODE_DIR, cpu_dir: Path = SYS_CPU_DIR) -> MachineTopology:
    """The machine's nodes from sysfs; without node folders, one pseudo-node per CPU socket (no distances)."""
    found = sorted((p for p in _listdir(node_dir) if _NODE_DIR.fullmatch(p.name)), key=lambda p: p.name)
    if not found:
        return _socket_topology(cpu_dir)
    nodes, warnings = [], []
    for path in found:
        match = _NODE_DIR.fullmatch(path.name)
        assert match is not None
        distances: tuple[int, ...] | None
        try:
            distances = tuple(int(x) for x in (path / "distance").read_text().split())
        except (OSError, ValueError) as e:
            warnings.append(f"cannot read {path / 'distance'}: {getattr(e, 'strerror', None) or e}")
            distances = None
        nodes.append(MachineNode(int(match.group(1)), distances))
    return MachineTopology(tuple(nodes), "sysfs", tuple(warnings))


def _listdir(path: Path) -> list[Path]:
    try:
        return list(path.iterdir())
    except OSError:
        return []


def _socket_topology(cpu_dir: Path) -> MachineTopology:
    sockets: set[int] = set()
    for cpu in _listdir(cpu_dir):
        try:
            sockets.add(int((cpu / "topology" / "physical_package_id").read_text()))
        except (OSError, ValueError):
            continue
    return MachineTopology(tuple(MachineNode(s, None) for s in sorted(sockets)), "sockets")


@dataclass(frozen=True, slots=True)
class NUMAInfo:
    """The topology manager's view: node IDs and (prefer-closest only) distance rows indexed by node ID."""

    nodes: tuple[int, ...]
    distances: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def from_machine(cls, machine: MachineTopology, prefer_closest: bool) -> NUMAInfo:
        ids = tuple(n.id for n in machine.nodes)
        too_high = [i for i in ids if i > MAX_BIT]
        if too_high:
            raise NUMAInfoError(f"NUMA node IDs {too_high} do not fit a 64-bit mask (0-63)")
        if not prefer_closest:
            return cls(ids)
        if any(n.distances is None for n in machine.nodes):
            raise NUMAInfoError("cannot discover NUMA topology: error getting NUMA distances from cadvisor")
        # Distance rows are indexed by node ID, so the IDs must be 0..n-1 and every row that long.
        if sorted(ids) != list(range(len(ids))) or any(
            len(n.distances or ()) < len(ids) for n in machine.nodes
        ):
            raise NUMAInfoError(
                "prefer-closest-numa-nodes needs NUMA node IDs 0..n-1 with a full distance row each, "
                f"got {list(ids)}"
            )
        return cls(ids, {n.id: n.distances or () for n in machine.nodes})

    def default_affinity_mask(self) -> BitMask:
        return BitMask.of(*self.nodes)

    def average_distance(self, mask: BitMask) -> float:
        bits = mask.bits()
        if not bits:
            return 0.0
        total = sum(self.distances[i][j] for i in bits for j in bits)
        return total / (len(bits) * len(bits))

    def closest(self, m1: BitMask, m2: BitMask) -> BitMask:
        """Fewer nodes wins; with as many, the smaller average distance, then the smaller integer value."""
        if m1.count() != m2.count():
            return narrowest(m1, m2)
        d1, d2 = self.average_distance(m1), self.average_distance(m2)
        if d1 == d2:
            return m1 if m1.is_less_than(m2) else m2
        return m1 if d1 < d2 else m2
