"""The DRA documents of a manifest folder, kept in step file by file.

A scan that reads a few files costs work in proportion to those files, not to the folder: each key
(kind and namespace/name, or a class's extendedResourceName) knows the files that define it, and the
documents handed out change only where a file's documents or its refusal changed.

Rule: the first file in name order that defines a key wins; every later file defining it is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from kubedevice.resource.documents import DRADocument
from kubedevice.resource.model import (
    ClaimDocument,
    ClaimTemplateDocument,
    DeviceClassDocument,
    DeviceTaintRuleDocument,
    DRADocuments,
    NamespaceDocument,
)

_Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Entry:
    docs: list[DRADocument]
    #: (key, how an error names it), in document order.
    keys: tuple[tuple[_Key, str], ...]


class DRAFolderIndex:
    def __init__(self) -> None:
        self._files: dict[str, _Entry] = {}
        self._definers: dict[_Key, set[str]] = {}
        #: Files whose keys' definers changed since the last `clashes()`.
        self._touched: set[str] = set()
        self.clashing: dict[str, str] = {}
        #: The documents handed out, by kind and key, and which file's documents they are.
        self._maps: dict[str, dict[str, DRADocument]] = {k: {} for k in _KINDS}
        self._contributing: dict[str, list[DRADocument]] = {}
        #: Files whose documents changed since the last `documents()`.
        self._pending: set[str] = set()
        self._refused: frozenset[str] = frozenset()
        self._snapshot = DRADocuments()
        self._dirty = False

    def files(self) -> Iterable[str]:
        return self._files.keys()

    def set_file(self, file: str, docs: list[DRADocument]) -> None:
        """`file`'s documents now ([] when it has none, is refused for a parse error, or is gone)."""
        old = self._files.get(file)
        if old is not None and old.docs is docs:
            return
        if old is None and not docs:
            return
        keys = tuple(_keys(docs))
        for key, _ in old.keys if old is not None else ():
            definers = self._definers[key]
            definers.discard(file)
            self._touched.update(definers)
            if not definers:
                del self._definers[key]
        for key, _ in keys:
            definers = self._definers.setdefault(key, set())
            self._touched.update(definers)
            definers.add(file)
        self._touched.add(file)
        self._pending.add(file)
        if docs:
            self._files[file] = _Entry(docs, keys)
        else:
            self._files.pop(file, None)

    def clashes(self) -> set[str]:
        """Brings `clashing` (file -> error) up to date; returns the files whose status changed."""
        changed: set[str] = set()
        for file in self._touched:
            entry = self._files.get(file)
            error = None
            if entry is not None:
                for key, what in entry.keys:
                    first = min(self._definers[key])
                    if first != file:
                        error = f"{what} is already defined by {first}"
                        break
            if error != self.clashing.get(file):
                changed.add(file)
                if error is None:
                    del self.clashing[file]
                else:
                    self.clashing[file] = error
        self._touched.clear()
        return changed

    def documents(self, refused: frozenset[str], errors: dict[str, str]) -> tuple[DRADocuments, bool]:
        """The documents of the files not `refused`, and whether they differ from the last call's."""
        affected = self._pending | (refused ^ self._refused)
        self._pending = set()
        for file in affected:
            for d in self._contributing.pop(file, ()):
                kind_map = self._maps[d.KIND]
                if kind_map.get(d.meta.key) is d:
                    del kind_map[d.meta.key]
                self._dirty = True
            entry = self._files.get(file)
            if entry is not None and file not in refused:
                for d in entry.docs:
                    self._maps[d.KIND][d.meta.key] = d
                self._contributing[file] = entry.docs
                self._dirty = True
        self._refused = refused
        changed = self._dirty or errors != self._snapshot.errors
        if changed:
            # Each map holds one kind only (set by its documents' KIND): a plain copy, no walk.
            m = self._maps
            self._snapshot = DRADocuments(
                claims=cast(dict[str, ClaimDocument], dict(m[ClaimDocument.KIND])),
                templates=cast(dict[str, ClaimTemplateDocument], dict(m[ClaimTemplateDocument.KIND])),
                classes=cast(dict[str, DeviceClassDocument], dict(m[DeviceClassDocument.KIND])),
                namespaces=cast(dict[str, NamespaceDocument], dict(m[NamespaceDocument.KIND])),
                taint_rules=cast(dict[str, DeviceTaintRuleDocument], dict(m[DeviceTaintRuleDocument.KIND])),
                errors=dict(errors),
            )
            self._dirty = False
        return self._snapshot, changed


_KINDS = (
    ClaimDocument.KIND,
    ClaimTemplateDocument.KIND,
    DeviceClassDocument.KIND,
    NamespaceDocument.KIND,
    DeviceTaintRuleDocument.KIND,
)


def _keys(docs: list[DRADocument]) -> Iterable[tuple[_Key, str]]:
    for d in docs:
        yield (d.KIND, d.meta.key), f"{d.KIND} {d.meta.key}"
        if isinstance(d, DeviceClassDocument) and d.extended_resource_name is not None:
            what = f"extendedResourceName {d.extended_resource_name} (DeviceClass {d.meta.name})"
            yield ("extendedResourceName", d.extended_resource_name), what
