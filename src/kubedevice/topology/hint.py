"""TopologyHint: a NUMA mask (or None, "any node") and whether it is among the narrowest possible."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubedevice.topology.bitmask import BitMask


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """`numa_node_affinity` None means no preference; the zero hint `(None, False)` is "nothing stored"."""

    numa_node_affinity: BitMask | None = None
    preferred: bool = False

    @classmethod
    def of(cls, nodes: tuple[int, ...] | list[int] | None, preferred: bool) -> TopologyHint:
        return cls(None if nodes is None else BitMask.of(*nodes), preferred)

    def is_equal(self, other: TopologyHint) -> bool:
        return self == other

    def less_than(self, other: TopologyHint) -> bool:
        """Preferred first, then narrower (used for sorting, never by the merge)."""
        if self.preferred != other.preferred:
            return self.preferred
        mine = self.numa_node_affinity or BitMask()
        return mine.is_narrower_than(other.numa_node_affinity or BitMask())

    def nodes(self) -> list[int] | None:
        return None if self.numa_node_affinity is None else self.numa_node_affinity.bits()

    def to_json(self) -> dict[str, Any]:
        """The daemon's view: `{"numaNodes": [0], "preferred": true}`; `numaNodes` null when there is none."""
        return {"numaNodes": self.nodes(), "preferred": self.preferred}

    def __str__(self) -> str:
        mask = "nil" if self.numa_node_affinity is None else str(self.numa_node_affinity)
        return f"{mask}{'T' if self.preferred else 'F'}"


#: What GetAffinity answers for a pod or container it has no hint for.
NO_HINT = TopologyHint(None, False)
#: A provider's "no preference" for a resource.
DONT_CARE = TopologyHint(None, True)
