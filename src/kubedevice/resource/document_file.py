"""One manifest file's bytes as decoded documents: JSON or YAML (libyaml when there), `kind: List` flattened.
Shared by the manifest folder's pods and DRA documents and by the ResourceSlice folder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MANIFEST_SUFFIXES", "ManifestError", "load_documents"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(ValueError):
    """Why a manifest file cannot be used; str() is one line naming the problem."""


def load_documents(file_name: str, content: bytes) -> list[Any]:
    """The decoded documents of one file (`.json`: one document; YAML: all of them), `kind: List`
    flattened into its items. Raises ManifestError when the file cannot be read as such."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(f"not UTF-8 text: {err}") from None
    if file_name.endswith(".json"):
        try:
            docs: list[Any] = [json.loads(text)] if text.strip() else []
        except json.JSONDecodeError as err:
            raise ManifestError(f"JSON error: {' '.join(str(err).split())}") from None
    else:
        docs = _load_yaml(text)
    flat: list[Any] = []
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            flat.extend(doc["items"])
        else:
            flat.append(doc)
    return flat


def _load_yaml(text: str) -> list[Any]:
    """The file's non-empty YAML documents, read by libyaml when PyYAML has it (several times faster),
    plain documents built in one walk (kubedevice.resource.plain_yaml).

    libyaml words its errors differently, so a file it rejects is read again by the pure loader: the
    documents or the error reported are always the pure loader's.
    """
    # Here: the daemon serves before any YAML is read.
    import yaml

    from kubedevice.resource.plain_yaml import PLAIN_LOADER as fast

    if fast is not None:
        try:
            return [d for d in yaml.load_all(text, Loader=fast) if d is not None]
        except yaml.YAMLError:
            pass
    try:
        return [d for d in yaml.load_all(text, Loader=yaml.SafeLoader) if d is not None]
    except yaml.YAMLError as err:
        raise ManifestError(f"YAML error: {' '.join(str(err).split())}") from None
