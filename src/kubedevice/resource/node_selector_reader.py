"""Reading a core/v1 `NodeSelector` from a document, checked as the API server checks it."""

from __future__ import annotations

from typing import Any

from kubedevice.resource.fields import Fields
from kubedevice.resource.names import is_qualified_name
from kubedevice.resource.node_selector import (
    FIELD_OPERATORS,
    LABEL_OPERATORS,
    NODE_NAME_FIELD,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)

__all__ = ["read_node_selector"]


def read_node_selector(f: Fields, value: Any, path: str, *, one_term: bool = True) -> NodeSelector:
    """A checked selector; DRA's fields (`one_term`) must use exactly one term."""
    raw = f.mapping(value, path)
    raw_terms = f.items(raw.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")
    if one_term and len(raw_terms) != 1:
        raise f.error(f"{path}.nodeSelectorTerms", f"must have exactly one term, not {len(raw_terms)}")
    if not raw_terms:
        raise f.error(f"{path}.nodeSelectorTerms", "must have at least one term")
    terms = []
    for i, raw_term in enumerate(raw_terms):
        at = f"{path}.nodeSelectorTerms[{i}]"
        term = f.mapping(raw_term, at)
        expressions = tuple(
            _requirement(f, item, f"{at}.matchExpressions[{j}]", fields=False)
            for j, item in enumerate(f.items(term.get("matchExpressions"), f"{at}.matchExpressions"))
        )
        fields = tuple(
            _requirement(f, item, f"{at}.matchFields[{j}]", fields=True)
            for j, item in enumerate(f.items(term.get("matchFields"), f"{at}.matchFields"))
        )
        terms.append(NodeSelectorTerm(expressions, fields))
    return NodeSelector(tuple(terms))


def _requirement(f: Fields, value: Any, path: str, *, fields: bool) -> NodeSelectorRequirement:
    raw = f.mapping(value, path)
    key = f.string(raw.get("key"), f"{path}.key", required=True)
    operator = f.string(raw.get("operator"), f"{path}.operator", required=True)
    values = tuple(
        f.string(v, f"{path}.values[{i}]") for i, v in enumerate(f.items(raw.get("values"), f"{path}.values"))
    )
    if fields:
        if key != NODE_NAME_FIELD:
            raise f.error(f"{path}.key", f'Unsupported value: "{key}": supported values: "{NODE_NAME_FIELD}"')
        if operator not in FIELD_OPERATORS:
            raise f.error(
                f"{path}.operator", f'Unsupported value: "{operator}": supported values: "In", "NotIn"'
            )
        if len(values) != 1:
            raise f.error(f"{path}.values", "must have one element")
        return NodeSelectorRequirement(key, operator, values)
    if not is_qualified_name(key):
        raise f.error(f"{path}.key", f"{key!r} is not a label key (a qualified name, e.g. example.com/gpu)")
    if operator not in LABEL_OPERATORS:
        supported = ", ".join(f'"{o}"' for o in LABEL_OPERATORS)
        raise f.error(f"{path}.operator", f'Unsupported value: "{operator}": supported values: {supported}')
    if operator in ("In", "NotIn") and not values:
        raise f.error(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
    if operator in ("Exists", "DoesNotExist") and values:
        raise f.error(f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise f.error(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'")
        try:
            int(values[0])
        except ValueError:
            raise f.error(f"{path}.values[0]", f"{values[0]!r} is not an integer") from None
    return NodeSelectorRequirement(key, operator, values)
