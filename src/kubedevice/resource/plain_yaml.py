"""libyaml's safe loader with plain documents built in one walk: what a manifest folder reads.

PyYAML's SafeConstructor builds every node through a generic dispatch (a tag lookup, a generator per
mapping and sequence, a second pass over those generators): most of the time of reading a small manifest,
and it runs in the manifest scan's thread, holding the GIL the event loop needs for every plugin call.
A manifest is plain (maps with scalar keys, lists, strings, ints, bools, nulls, floats), so
`PlainSafeLoader` builds such a document in one recursive walk, with SafeConstructor's own scalar
constructors, and hands any other document (merge keys, sets, timestamps, binary, custom tags) to
SafeConstructor untouched: whichever way it goes, the result is SafeConstructor's.

Either loader here measures each composed document first (kubedevice.resource.document_limits: its size,
depth and alias expansion) and raises LimitError, before building anything, for one past a limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kubedevice.resource.document_limits import check_yaml_document

__all__ = ["CHECKED_SAFE_LOADER", "PLAIN_LOADER"]

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
#: Keys SafeConstructor.flatten_mapping rewrites: such a mapping takes the general path.
_SPECIAL_KEYS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})
_SCALARS: dict[str, Callable[[Any, ScalarNode], Any]] = {
    "tag:yaml.org,2002:int": SafeConstructor.construct_yaml_int,
    "tag:yaml.org,2002:bool": SafeConstructor.construct_yaml_bool,
    "tag:yaml.org,2002:null": SafeConstructor.construct_yaml_null,
    "tag:yaml.org,2002:float": SafeConstructor.construct_yaml_float,
}


class _NotPlain(Exception):
    """The document has a node the one-walk construction leaves to SafeConstructor."""


def _checked_loader(base: type[Any]) -> type[Any]:
    class CheckedSafeLoader(base):  # type: ignore[misc]
        def construct_document(self, node: Node) -> Any:
            check_yaml_document(node)
            return super().construct_document(node)

    return CheckedSafeLoader


def _plain_loader(base: type[Any]) -> type[Any]:
    class PlainSafeLoader(base):  # type: ignore[misc]
        def construct_document(self, node: Node) -> Any:
            check_yaml_document(node)
            try:
                return self._construct_plain(node, {}, set())
            except (_NotPlain, RecursionError):
                return super().construct_document(node)

        def _construct_plain(self, node: Node, built: dict[int, Any], open_nodes: set[int]) -> Any:
            # An alias is the same node object: it gets the same Python object, as in SafeConstructor.
            key = id(node)
            if key in built:
                return built[key]
            kind, tag = type(node), node.tag
            if type(node) is ScalarNode:
                if tag == _STR:
                    data = node.value
                else:
                    construct = _SCALARS.get(tag)
                    if construct is None:
                        raise _NotPlain
                    data = construct(self, node)
            else:
                if key in open_nodes:
                    raise _NotPlain  # a recursive anchor: SafeConstructor builds it in two passes
                open_nodes.add(key)
                if kind is MappingNode and tag == _MAP:
                    data = {}
                    for key_node, value_node in node.value:
                        if type(key_node) is not ScalarNode or key_node.tag in _SPECIAL_KEYS:
                            raise _NotPlain
                        data[self._construct_plain(key_node, built, open_nodes)] = self._construct_plain(
                            value_node, built, open_nodes
                        )
                elif kind is SequenceNode and tag == _SEQ:
                    data = [self._construct_plain(item, built, open_nodes) for item in node.value]
                else:
                    raise _NotPlain
                open_nodes.discard(key)
            built[key] = data
            return data

    return PlainSafeLoader


#: PyYAML's pure safe loader, each document measured first: the loader whose errors are reported.
CHECKED_SAFE_LOADER: type[Any] = _checked_loader(yaml.SafeLoader)

#: The loader for `yaml.load_all`: libyaml with the one-walk construction; None without libyaml.
PLAIN_LOADER: type[Any] | None = (
    _plain_loader(yaml.CSafeLoader) if getattr(yaml, "CSafeLoader", None) is not None else None
)
