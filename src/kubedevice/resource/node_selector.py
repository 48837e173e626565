"""core/v1 `NodeSelector` as DRA uses it: on slices and devices that serve more than one node, and in an
allocation result. A selector is read and checked as the API server checks it, and matched against one
node's name and labels as the scheduler matches it (`nodeaffinity.NewNodeSelector`); node_selector_reader.py
reads one from a document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FIELD_OPERATORS",
    "LABEL_OPERATORS",
    "NODE_NAME_FIELD",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
]

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
#: The only node field a selector may name.
NODE_NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """`value`: the node's label (or field) under `key`, None when it has none."""
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        # Gt / Lt: both sides integers; a label that is not one never matches (as upstream).
        if value is None:
            return False
        try:
            have, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > bound if self.operator == "Gt" else have < bound

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Every requirement must hold; a term with none matches no node (upstream's rule)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        return all(r.matches(labels.get(r.key)) for r in self.match_expressions) and all(
            r.matches(node_name) for r in self.match_fields
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_expressions:
            out["matchExpressions"] = [r.to_json() for r in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [r.to_json() for r in self.match_fields]
        return out


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """Any term may match (the terms are ORed)."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        return any(t.matches(node_name, labels) for t in self.terms)

    @classmethod
    def for_node(cls, node_name: str) -> NodeSelector:
        """The selector an allocation for one node carries: `metadata.name In [<node>]`."""
        field = NodeSelectorRequirement(NODE_NAME_FIELD, "In", (node_name,))
        return cls((NodeSelectorTerm(match_fields=(field,)),))

    def to_json(self) -> dict[str, Any]:
        return {"nodeSelectorTerms": [t.to_json() for t in self.terms]}
