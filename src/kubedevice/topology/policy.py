"""The four topology manager policies and the hint merge they share.

The merge walks the cartesian product of every provider's hint lists lazily and keeps the best combination
with the kubelet's sequential comparison, so ties resolve exactly as there (the result does not depend on the
order of resources inside a provider).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubedevice.topology.bitmask import BitMask, narrowest
from kubedevice.topology.hint import DONT_CARE, TopologyHint
from kubedevice.topology.numa_info import NUMAInfo
from kubedevice.topology.options import PolicyOptions

POLICY_NONE = "none"
POLICY_BEST_EFFORT = "best-effort"
POLICY_RESTRICTED = "restricted"
POLICY_SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (POLICY_NONE, POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)

#: One provider's answer: resource -> hint list (None = no preference, [] = cannot be satisfied); None or {}
#: means the provider has no preference at all.
ProviderHints = Mapping[str, Sequence[TopologyHint] | None] | None

_CANNOT = TopologyHint(None, False)


def flatten(providers_hints: Iterable[ProviderHints]) -> list[list[TopologyHint]]:
    """One hint list per (provider, resource), with "no preference" and "impossible" made explicit."""
    lists: list[list[TopologyHint]] = []
    for provider in providers_hints:
        if not provider:
            lists.append([DONT_CARE])
            continue
        for hints in provider.values():
            if hints is None:
                lists.append([DONT_CARE])
            elif len(hints) == 0:
                lists.append([_CANNOT])
            else:
                lists.append(list(hints))
    return lists


def filter_single_numa(lists: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
    """Keep only don't-care hints and preferred single-node hints; an emptied list stays empty."""
    return [
        [
            h
            for h in hints
            if h.preferred and (h.numa_node_affinity is None or h.numa_node_affinity.count() == 1)
        ]
        for hints in lists
    ]


def merge_permutation(default: BitMask, permutation: Sequence[TopologyHint]) -> TopologyHint:
    """AND of every affinity with the default mask; preferred only if all are and all masks are equal."""
    preferred = True
    first: BitMask | None = None
    value = default.value
    for hint in permutation:
        mask = hint.numa_node_affinity
        if mask is not None:
            if first is None:
                first = mask
            elif mask != first:
                preferred = False
            value &= mask.value
        if not hint.preferred:
            preferred = False
    return TopologyHint(BitMask(value), preferred)


def best_non_preferred_affinity_count(lists: list[list[TopologyHint]]) -> int:
    """The widest of the providers' narrowest affinities: the width a non-preferred result should have."""
    best = 0
    for hints in lists:
        counts = [h.numa_node_affinity.count() for h in hints if h.numa_node_affinity is not None]
        if counts:
            best = max(best, min(counts))
    return best


@dataclass(frozen=True, slots=True)
class HintMerger:
    numa_info: NUMAInfo
    lists: list[list[TopologyHint]]
    use_closest: bool

    def merge(self) -> TopologyHint:
        default = self.numa_info.default_affinity_mask()
        b = best_non_preferred_affinity_count(self.lists)
        best: TopologyHint | None = None
        for permutation in itertools.product(*self.lists):
            best = self.compare(best, merge_permutation(default, permutation), b)
        return best if best is not None else TopologyHint(default, False)

    def compare(self, cur: TopologyHint | None, cand: TopologyHint, b: int) -> TopologyHint | None:
        k = cand.numa_node_affinity.count() if cand.numa_node_affinity is not None else 0
        if k == 0:
            return cur
        if cur is None:
            return cand
        if cand.preferred != cur.preferred:
            return cand if cand.preferred else cur
        if cur.preferred:
            return self._fit(cur, cand)
        c = cur.numa_node_affinity.count() if cur.numa_node_affinity is not None else 0
        if c > b:
            return self._fit(cur, cand)
        if c == b:
            return self._fit(cur, cand) if k == b else cur
        if k > b:
            return cur
        if k == b:
            return cand
        if k != c:
            return cand if k > c else cur
        return self._fit(cur, cand)

    def _fit(self, cur: TopologyHint, cand: TopologyHint) -> TopologyHint:
        """CompareNUMAAffinityMasks: equal masks keep the current one."""
        a, m = cur.numa_node_affinity, cand.numa_node_affinity
        assert a is not None and m is not None
        if a == m:
            return cur
        best = self.numa_info.closest(a, m) if self.use_closest else narrowest(a, m)
        return cur if best == a else cand


@dataclass(frozen=True, slots=True)
class Policy:
    """`merge(providers' hints) -> (best hint, admit)` for one of the kubelet's four policies."""

    name: str
    numa_info: NUMAInfo
    options: PolicyOptions = field(default_factory=PolicyOptions)

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f'unknown policy: "{self.name}"')

    def merge(self, providers_hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        if self.name == POLICY_NONE:
            return TopologyHint(None, False), True
        lists = flatten(providers_hints)
        if self.name == POLICY_SINGLE_NUMA_NODE:
            best = HintMerger(self.numa_info, filter_single_numa(lists), use_closest=False).merge()
            if best.numa_node_affinity == self.numa_info.default_affinity_mask():
                best = TopologyHint(None, best.preferred)
            return best, best.preferred
        best = HintMerger(self.numa_info, lists, use_closest=self.options.prefer_closest_numa).merge()
        return best, best.preferred or self.name == POLICY_BEST_EFFORT
