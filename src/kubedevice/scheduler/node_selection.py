"""The nodes an allocation may be used on (upstream's `createNodeSelector`).

A device of one node (its slice's `nodeName`, or with per-device node selection its own), or one with
`bindsToNode`, binds the whole allocation to the node it was made for. Otherwise the selectors of the slices
(or of the devices) are merged into one term, each requirement once; devices available on every node
(`allNodes`) add nothing, and an allocation of such devices only may be used anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubedevice.resource.node_selector import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from kubedevice.scheduler.candidate import Candidate

__all__ = ["allocation_nodes"]


def allocation_nodes(devices: Iterable[Candidate], node_name: str) -> tuple[str, NodeSelector | None]:
    """(node, None) when the allocation is bound to `node_name`; ("", selector) when it may be used on
    the nodes the selector matches; ("", None) when on any node."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for candidate in devices:
        device, published = candidate.device, candidate.slice
        if published is None or device.binds_to_node:
            return node_name, None
        if published.per_device_node_selection:
            name, selector = device.node_name, device.node_selector
        else:
            name, selector = published.node_name, published.node_selector
        if name:
            return node_name, None
        if selector is not None:
            # One term: the API requires exactly one on slices and devices.
            term = selector.terms[0]
            _add_new(term.match_fields, fields)
            _add_new(term.match_expressions, expressions)
    if fields or expressions:
        return "", NodeSelector((NodeSelectorTerm(tuple(expressions), tuple(fields)),))
    return "", None


def _add_new(requirements: Iterable[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    """Each requirement once: the same key, operator and set of values is already there."""
    for requirement in requirements:
        values = set(requirement.values)
        if not any(
            r.key == requirement.key and r.operator == requirement.operator and set(r.values) == values
            for r in into
        ):
            into.append(requirement)
