"""How much of a manifest file is read: only regular files, at most so many bytes per file and per document,
so deep, and so much alias expansion. Each limit is where the API server draws its own line, or below it
where Python needs it:

- a file: 3 MiB, the API server's request body limit (`MaxRequestBodyBytes`), which a `kind: List` of
  many objects must fit too; read with a bounded read, so a device file (a copy of /dev/zero's node)
  costs nothing;
- a document: 1.5 MiB, etcd's default `--max-request-bytes`: the largest object the API server can store;
- nesting: 100 levels. go-yaml and encoding/json stop at 10,000, but every reader of a document here is a
  recursive Python walk (the plain-document builder, the identity hash, the CEL values) that Python's
  1,000-frame recursion limit stops first; a real Pod or claim is under 20 levels deep;
- aliases: go-yaml v3's rule, which the API server's decoder (sigs.k8s.io/yaml) applies: a document of
  more than 1,000 decoded nodes, more than 100 of them from alias expansion, is refused when the share of
  alias-expanded nodes passes 99% (up to 400,000 nodes), falling to 10% at 4,000,000. The expanded size is
  computed on the composed node graph (an alias's subtree is measured once), so a bomb is refused without
  being expanded; an anchor whose value contains itself is refused as go-yaml refuses it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from typing import Any, Final

from yaml.nodes import MappingNode, Node, SequenceNode

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_FILE_BYTES",
    "LimitError",
    "check_depth",
    "check_yaml_document",
    "read_regular_file",
]

MAX_FILE_BYTES: Final = 3 * 1024 * 1024
MAX_DOCUMENT_BYTES: Final = 3 * 1024 * 1024 // 2
MAX_DEPTH: Final = 100

#: go-yaml v3 (decode.go): alias_ratio_range_low / _high.
_ALIAS_RATIO_LOW: Final = 400_000
_ALIAS_RATIO_HIGH: Final = 4_000_000


class LimitError(ValueError):
    """A file or document past one of the limits; str() is one line saying which."""


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a file"


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at `path` (symlinks followed), at most MAX_FILE_BYTES of them.

    Raises LimitError for anything else (a FIFO, a device, a socket is never opened for reading: checked
    with stat first, and O_NONBLOCK keeps a FIFO swapped in meanwhile from blocking the open) and for a
    larger file, never reading more than one byte past the limit; OSError when it cannot be read."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise LimitError(f"not a regular file ({_kind(mode)})")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise LimitError(f"not a regular file ({_kind(mode)})")
        chunks: list[bytes] = []
        left = MAX_FILE_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left <= 0:
        raise LimitError(f"larger than the {_mib(MAX_FILE_BYTES)} limit of a manifest file")
    return b"".join(chunks)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def _allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, SequenceNode):
        yield from node.value


def check_yaml_document(root: Node) -> None:
    """Refuse a composed YAML document past the document size, the depth or the alias rule (LimitError).

    Walks without recursion: a document without an alias of a collection (nearly every manifest) in one
    light walk; one with aliases then in a walk that measures the subtree an anchor names once, each alias
    adding its size, so the walk costs the document's text, never its expansion."""
    start, end = root.start_mark, root.end_mark
    if start is not None and end is not None and end.index - start.index > MAX_DOCUMENT_BYTES:
        raise LimitError(f"a YAML document larger than the {_mib(MAX_DOCUMENT_BYTES)} limit of one object")
    if not _has_collection_alias(root):
        return  # the common case, checked in one cheap walk: nothing is expanded, nothing recurses
    # id(node) -> (nodes decoded, of which from aliases, collections deep) of the subtree, once walked.
    measured: dict[int, tuple[int, int, int]] = {}
    # Each frame: node, its children still to walk, and its [nodes, aliases, height] so far.
    stack: list[tuple[Node, Iterator[Node], list[int]]] = [(root, _children(root), [1, 0, 1])]
    on_path = {id(root)}
    while stack:
        node, children, totals = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            measured[id(node)] = (totals[0], totals[1], totals[2])
            if stack:
                parent = stack[-1][2]
                parent[0] += totals[0]
                parent[1] += totals[1]
                parent[2] = max(parent[2], totals[2] + 1)
            continue
        key = id(child)
        if key in on_path:
            raise LimitError("a YAML anchor's value contains itself (a recursive alias)")
        seen = measured.get(key)
        if seen is not None:
            # An alias: the whole subtree is decoded again, every node of it from the alias.
            if len(stack) + seen[2] > MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels")
            totals[0] += seen[0]
            totals[1] += seen[0]
            totals[2] = max(totals[2], seen[2] + 1)
            continue
        collection = isinstance(child.value, list)
        if collection and len(stack) >= MAX_DEPTH:
            raise LimitError(f"nested deeper than {MAX_DEPTH} levels")
        on_path.add(key)
        stack.append((child, _children(child), [1, 0, int(collection)]))
    decoded, aliased, _ = measured[id(root)]
    if aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_alias_ratio(decoded):
        raise LimitError(
            f"document contains excessive aliasing ({aliased:,} of its {decoded:,} nodes come from "
            "aliases: a YAML alias bomb?)"
        )


def _has_collection_alias(root: Node) -> bool:
    """Whether a mapping or a sequence of the document is reached twice (an alias); raises LimitError
    for a collection deeper than MAX_DEPTH. An alias of a scalar costs no more than its own text."""
    seen: set[int] = set()
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        value = node.value
        if type(value) is not list:
            continue
        if depth > MAX_DEPTH:
            raise LimitError(f"nested deeper than {MAX_DEPTH} levels")
        key = id(node)
        if key in seen:
            return True
        seen.add(key)
        if type(node) is MappingNode:
            for key_node, value_node in value:
                stack.append((key_node, depth + 1))
                stack.append((value_node, depth + 1))
        else:
            stack.extend((item, depth + 1) for item in value)
    return False


def check_depth(doc: Any) -> None:
    """Refuse a decoded JSON document nested deeper than MAX_DEPTH (LimitError), without recursion."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            items: Any = value.values()
        elif isinstance(value, list):
            items = value
        else:
            continue
        if depth > MAX_DEPTH:
            raise LimitError(f"nested deeper than {MAX_DEPTH} levels")
        stack.extend((item, depth + 1) for item in items)
