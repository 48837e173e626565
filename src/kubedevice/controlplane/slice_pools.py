"""ResourceSlices published as files (`D/resourceslices/`), read into pools the allocator can use.

Each file is parsed on its own (a bad document is reported, the others kept); the slices of every file, in
published order (files in name order, documents in file order), are then gathered into this node's pools
by the scheduler's `gather_pools` (kubedevice.scheduler.pools: generations, completeness, the node filter,
left-out features).

Parsing and gathering are pure; `read_slices` does blocking file I/O (the daemon calls it in a thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubedevice.resource.document_file import (
    MANIFEST_SUFFIXES,
    ManifestError,
    broken_symlink,
    load_documents,
    read_document_file,
)
from kubedevice.resource.documents import check_kind
from kubedevice.resource.fields import DocumentError
from kubedevice.resource.node_labels import node_labels as node_labels_of
from kubedevice.resource.slice_document import parse_slice
from kubedevice.resource.slice_model import ResourceSliceDocument
from kubedevice.scheduler.pools import SliceReport, SliceScan, gather_pools
from kubedevice.wording import failure_line

__all__ = ["SliceFile", "gather_slices", "parse_slice_file", "read_slices"]


@dataclass(frozen=True, slots=True)
class SliceFile:
    """One file's slices in document order, and the documents (or the file) that could not be read."""

    file: str
    slices: tuple[ResourceSliceDocument, ...] = ()
    errors: tuple[SliceReport, ...] = ()


def parse_slice_file(file: str, content: bytes) -> SliceFile:
    """Every ResourceSlice of one file; a bad document is reported and the others kept."""
    try:
        docs = load_documents(file, content)
    except ManifestError as err:
        return SliceFile(file, errors=(SliceReport(file, "", str(err)),))
    try:
        return _parse_documents(file, docs)
    except Exception as err:  # one file's failure is that file's error, never the folder's
        why = f"cannot be read: {failure_line(err)}"
        return SliceFile(file, errors=(SliceReport(file, "", why),))


def _parse_documents(file: str, docs: list[Any]) -> SliceFile:
    many = len(docs) > 1
    slices: list[ResourceSliceDocument] = []
    errors: list[SliceReport] = []
    for index, doc in enumerate(docs):
        where = f"document {index + 1}: " if many else ""
        try:
            _, version = check_kind(doc, ("ResourceSlice",))
            slices.append(parse_slice(doc, version, file))
        except DocumentError as err:
            meta = doc.get("metadata") if isinstance(doc, Mapping) else None
            name = meta.get("name") if isinstance(meta, Mapping) and not err.anonymous else ""
            name = name if isinstance(name, str) else ""
            errors.append(SliceReport(file, name, f"{where if err.anonymous else ''}{err}"))
    return SliceFile(file, tuple(slices), tuple(errors))


def gather_slices(
    files: Iterable[SliceFile], node_name: str, node_labels: Mapping[str, str] | None = None
) -> SliceScan:
    """The slices of `files` (taken in name order) that are this node's, gathered into pools; each
    file's own errors are reported before those of its slices. `node_labels` defaults to
    `kubernetes.io/hostname=<node_name>` alone."""
    ordered = sorted(files, key=lambda f: f.file)
    labels = node_labels if node_labels is not None else node_labels_of(node_name)
    scan = gather_pools((s for f in ordered for s in f.slices), node_name, labels)
    by_file: dict[str, list[SliceReport]] = {}
    for error in scan.errors:
        by_file.setdefault(error.file, []).append(error)
    errors = [e for f in ordered for e in (*f.errors, *by_file.pop(f.file, ()))]
    return replace(scan, errors=tuple(errors))


def read_slices(folder: Path, node_name: str, node_labels: Mapping[str, str] | None = None) -> SliceScan:
    """Every slice file of `folder` (`.yaml`, `.yml`, `.json`, not hidden), read now, for node
    `node_name` with `node_labels` (by default only `kubernetes.io/hostname`). Blocking."""
    try:
        names = sorted(
            n for n in os.listdir(folder) if not n.startswith(".") and n.endswith(MANIFEST_SUFFIXES)
        )
    except FileNotFoundError:
        return SliceScan()
    except OSError as err:
        return SliceScan(errors=(SliceReport(str(folder), "", f"cannot list: {err.strerror or err}"),))
    files: list[SliceFile] = []
    for name in names:
        path = folder / name
        try:
            # A FIFO, a device, a socket or a folder is refused, never opened for reading; the size is
            # capped.
            content = read_document_file(path)
        except FileNotFoundError:
            broken = broken_symlink(path)
            if broken is not None:
                files.append(SliceFile(name, errors=(SliceReport(name, "", broken),)))
            continue  # else removed since the listing (a driver's file is replaced by rename)
        except ManifestError as err:
            files.append(SliceFile(name, errors=(SliceReport(name, "", str(err)),)))
            continue
        except OSError as err:
            files.append(
                SliceFile(name, errors=(SliceReport(name, "", f"cannot read: {err.strerror or err}"),))
            )
            continue
        files.append(parse_slice_file(name, content))
    return gather_slices(files, node_name, node_labels)
