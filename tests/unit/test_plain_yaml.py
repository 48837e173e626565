"""The manifest folder's YAML loader gives exactly what PyYAML's SafeLoader gives, plain document or not."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubedevice.resource.document_limits import LimitError
from kubedevice.resource.plain_yaml import CHECKED_SAFE_LOADER, PLAIN_LOADER

pytestmark = pytest.mark.skipif(PLAIN_LOADER is None, reason="PyYAML was built without libyaml")


def typed(value: Any, inside: tuple[int, ...] = ()) -> Any:
    """The value with every scalar's type spelled out: True == 1 == 1.0 must not hide a difference.
    A container inside itself (a recursive anchor) is told by how many levels up it is."""
    if isinstance(value, dict | list) and id(value) in inside:
        return ("up", inside[::-1].index(id(value)))
    inner = (*inside, id(value))
    if isinstance(value, dict):
        return ("dict", [(typed(k, inner), typed(v, inner)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v, inner) for v in value])
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


def load(text: str, loader: Any) -> Any:
    try:
        return ("ok", [typed(d) for d in yaml.load_all(text, Loader=loader)])
    except yaml.YAMLError as err:
        return ("error", type(err).__name__, str(err))


def assert_same_as_safe_loader(text: str) -> None:
    expected = load(text, yaml.CSafeLoader)
    assert load(text, PLAIN_LOADER) == expected
    if expected[0] == "ok":
        assert expected == load(text, yaml.SafeLoader)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["yes", "No", "on", "~", "0x1F", "0o17", "017", "1_000", ".inf", "2001-12-14"]),
    st.sampled_from(["=", "<<"]),
)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(scalars, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from([None, True, False]))
def test_any_plain_document_in_any_style(document: Any, flow: bool | None) -> None:
    assert_same_as_safe_loader(yaml.safe_dump(document, default_flow_style=flow))


@pytest.mark.parametrize(
    "text",
    [
        # Scalars SafeLoader resolves implicitly, and explicit tags.
        "a: [1, 2.5, true, null, ~, 0x1F, 0o17, 017, 1_000, .inf, -.nan, yes, No, on, '1', 2001-12-14]\n",
        "a: !!str 1\nb: !!int '3'\nc: !!float '1'\nd: !!bool 'yes'\ne: !!null ''\n",
        # Anchors and aliases: one object, as SafeLoader shares it.
        "x: &a {p: 1}\ny: *a\n",
        # Merge keys and the value key: the general path.
        "x: &a {p: 1, q: 0}\nz: {<<: *a, q: 2}\n",
        "x: &a {p: 1}\nz: {<<: [*a, {r: 3}], s: 4}\n",
        "= : x\n",
        # Keys that are not scalars, types beyond the plain ones, unknown tags.
        "? [1, 2]\n: v\n",
        "? {a: 1}\n: v\n",
        "!!set {a, b}\n",
        "!!omap [a: 1, b: 2]\n",
        "!!binary aGVsbG8=\n",
        "when: 2001-12-14t21:59:43.10-05:00\n",
        "- !foo bar\n",
        # Duplicate keys, equal keys of other types, several documents, empty ones.
        "a: b\na: c\n",
        "{1: a, 1.0: b, true: c}\n",
        "--- 1\n--- [a]\n---\n--- {k: v}\n",
        "",
        # What a manifest folder holds.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
        "spec:\n  containers:\n  - name: main\n    resources:\n"
        "      limits: {example.com/gpu: 1, cpu: 500m}\n",
    ],
)
def test_documents_beyond_the_plain_ones_and_manifests(text: str) -> None:
    assert_same_as_safe_loader(text)


@pytest.mark.parametrize("text", ["- &x [1, *x]\n", "&m {a: *m}\n", "[" * 101 + "]" * 101 + "\n"])
def test_a_recursive_anchor_or_a_document_past_the_depth_limit_is_refused_before_it_is_built(
    text: str,
) -> None:
    for loader in (PLAIN_LOADER, CHECKED_SAFE_LOADER):
        with pytest.raises(LimitError, match=r"contains itself|nested deeper than 100 levels"):
            list(yaml.load_all(text, Loader=loader))


def test_a_document_at_the_depth_limit_is_built_as_safe_loader_builds_it() -> None:
    assert_same_as_safe_loader("[" * 99 + "]" * 99 + "\n")


def test_an_alias_is_the_same_object_as_its_anchor() -> None:
    [document] = yaml.load_all("x: &a {p: [1]}\ny: *a\n", Loader=PLAIN_LOADER)
    assert document["x"] is document["y"]
