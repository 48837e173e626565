"""Reading the files of `D/resourceslices/`: each file's ResourceSlice documents, each slice used or ignored
with a reason. Blocking (file I/O and YAML): call it in a thread."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SLICE_API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
#: A slice file larger than this is refused unread (a plugin publishes a few KiB per hundred devices).
MAX_SLICE_FILE = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SliceEntry:
    """One document of a slice file: the slice as JSON, its driver, pool and devices, and why it is
    ignored (None when it is used)."""

    document: Mapping[str, Any]
    name: str = ""
    driver: str = ""
    pool: str = ""
    generation: int = 0
    devices: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SliceFile:
    entries: tuple[SliceEntry, ...] = ()
    #: Why the whole file could not be read (then it has no entries).
    error: str | None = None
    drivers: frozenset[str] = field(default_factory=frozenset)

    def problems(self) -> list[str]:
        found = [self.error] if self.error is not None else []
        return found + [e.error for e in self.entries if e.error is not None]

    def view(self, file: str) -> list[dict[str, Any]]:
        return [
            {
                "file": file,
                "name": e.name,
                "driver": e.driver,
                "pool": e.pool,
                "generation": e.generation,
                "devices": list(e.devices),
                "error": e.error,
                "slice": e.document,
            }
            for e in self.entries
        ]

    def devices(self) -> Iterator[tuple[str, str, str]]:
        for e in self.entries:
            if e.error is None:
                for device in e.devices:
                    yield e.driver, e.pool, device


def read_slice_folder(folder: Path, node_name: str) -> dict[str, SliceFile]:
    """file name -> what it holds, for every slice file of `folder` (none when it does not exist)."""
    from kubedevice.node.dra.slice_folder import is_slice_name

    out: dict[str, SliceFile] = {}
    try:
        names = sorted(n for n in os.listdir(folder) if is_slice_name(n))
    except FileNotFoundError:
        return out
    for name in names:
        try:
            out[name] = read_slice_file(folder / name, node_name)
        except FileNotFoundError:
            continue  # deleted meanwhile
    return out


def read_slice_file(path: Path, node_name: str) -> SliceFile:
    try:
        if path.stat().st_size > MAX_SLICE_FILE:
            return SliceFile(error=f"larger than {MAX_SLICE_FILE} bytes: not read")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as err:
        return SliceFile(error=f"cannot read: {getattr(err, 'strerror', None) or err}")
    try:
        documents = _load(path.name, text)
    except ValueError as err:
        return SliceFile(error=str(err))
    entries = tuple(_entry(doc, index, node_name) for index, doc in enumerate(documents))
    return SliceFile(entries=entries, drivers=frozenset(e.driver for e in entries if e.driver))


def _load(name: str, text: str) -> list[Any]:
    if name.endswith(".json"):
        try:
            return [json.loads(text)] if text.strip() else []
        except json.JSONDecodeError as err:
            raise ValueError(f"JSON error: {err}") from None
    import yaml

    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise ValueError(f"YAML error: {' '.join(str(err).split())}") from None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _entry(doc: Any, index: int, node_name: str) -> SliceEntry:
    if not isinstance(doc, Mapping):
        return SliceEntry({}, error=f"document {index + 1}: not a mapping")
    document = json.loads(json.dumps(doc, default=str))
    meta = _mapping(doc.get("metadata"))
    name = str(meta.get("name") or f"document {index + 1}")
    where = f"ResourceSlice {name}"
    if doc.get("kind") != "ResourceSlice":
        return SliceEntry(document, name, error=f"{where}: kind {doc.get('kind')!r} is not ResourceSlice")
    if doc.get("apiVersion") not in SLICE_API_VERSIONS:
        return SliceEntry(
            document,
            name,
            error=f"{where}: apiVersion {doc.get('apiVersion')!r} is not supported "
            "(use resource.k8s.io/v1, v1beta2 or v1beta1)",
        )
    spec = _mapping(doc.get("spec"))
    driver = spec.get("driver")
    if not isinstance(driver, str) or not driver:
        return SliceEntry(document, name, error=f"{where}: spec.driver is missing")
    pool = _mapping(spec.get("pool"))
    pool_name = str(pool.get("name") or "")
    generation = pool.get("generation", 0)
    generation = generation if isinstance(generation, int) else 0
    slice_node = spec.get("nodeName")
    if slice_node != node_name and spec.get("allNodes") is not True:
        return SliceEntry(
            document,
            name,
            driver,
            pool_name,
            generation,
            error=f"{where}: for node {slice_node!r}, not this node ({node_name}): ignored",
        )
    devices: list[str] = []
    for i, device in enumerate(spec.get("devices") or []):
        device_name = device.get("name") if isinstance(device, Mapping) else None
        if not isinstance(device_name, str) or not _DNS_LABEL.fullmatch(device_name):
            return SliceEntry(
                document,
                name,
                driver,
                pool_name,
                generation,
                error=f"{where}: spec.devices[{i}].name {device_name!r} is not a DNS label: ignored",
            )
        devices.append(device_name)
    return SliceEntry(document, name, driver, pool_name, generation, tuple(devices))
