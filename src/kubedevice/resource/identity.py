"""The identity of a document read from a file: its default UID and the hash that tells its versions apart.

The kubelet gives a static pod without `metadata.uid` the hash of the decoded pod, the node name and the
source file's path; kubedevice hashes the namespace, the name, the file's path relative to the manifest
folder and the decoded document. Hashing the decoded document, not the file's bytes, means a comment, a
re-indentation or an edit of another document of the same file changes nothing, while any change to what
the document says, or a renamed file, makes a new object. The rule is the same for every kind of
document a folder is read for.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(doc: Any) -> bytes:
    """The decoded document as one canonical JSON text: sorted keys, no spaces, non-ASCII kept; a value
    JSON lacks is written as text (a YAML timestamp as its ISO text)."""
    try:
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        # YAML can decode what JSON cannot hold (timestamps, binary, sets, keys of mixed types).
        text = json.dumps(_plain(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def document_digest(doc: Any) -> str:
    """A hash of what the decoded document says: another value is another version of it."""
    return hashlib.sha256(canonical_json(doc)).hexdigest()[:16]


def document_uid(doc: Any, namespace: str, name: str, source_path: str) -> str:
    """The default UID of a document without `metadata.uid`, as a UUID-shaped string: the first 128 bits
    of SHA-256 over `<namespace>\\0<name>\\0<source_path>\\0<canonical JSON>`.

    `source_path` is the file's path relative to the manifest folder. The same decoded document under the
    same namespace/name from the same file always gets the same UID; a change to the document, or the
    same document in another file, gets another.
    """
    h = hashlib.sha256()
    for part in (namespace, name, source_path):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    h.update(canonical_json(doc))
    x = h.hexdigest()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:32]}"


def _plain(value: Any) -> Any:
    """`value` with every mapping key a string and every value JSON can hold, each type kept distinct."""
    if isinstance(value, Mapping):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return {"!set": sorted(json.dumps(_plain(v), sort_keys=True) for v in value)}
    return {f"!{type(value).__name__}": repr(value)}


def _key(key: Any) -> str:
    return key if isinstance(key, str) else f"!{type(key).__name__}:{key!r}"
