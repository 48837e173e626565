"""ResourceSlices published as files (`D/resourceslices/`), read into pools the allocator can use.

A pool counts only in its highest generation, and only when every slice of that generation
(`resourceSliceCount`) is present; otherwise it is incomplete and its devices wait. Slices for another
node are ignored with a warning, a bad slice is reported and ignored, and a slice using a feature
kubedevice leaves out is reported once and its devices are marked so they are never candidates.
Order is the published order: files in name order, documents in file order, devices in `spec.devices`
order (never sorted); pools by (driver, pool name) compared as bytes.

Parsing and gathering are pure; `read_slices` does blocking file I/O (the daemon calls it in a thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kubedevice.resource.document_file import MANIFEST_SUFFIXES, ManifestError, load_documents
from kubedevice.resource.documents import check_kind
from kubedevice.resource.fields import DocumentError
from kubedevice.resource.model import Pool, ResourceSliceDocument
from kubedevice.resource.slice_document import parse_slice

__all__ = ["SliceFile", "SliceReport", "SliceScan", "gather_slices", "parse_slice_file", "read_slices"]


@dataclass(frozen=True, slots=True)
class SliceReport:
    """A problem with one slice (`slice` its name) or a whole file (`slice` "")."""

    file: str
    slice: str
    message: str


@dataclass(frozen=True, slots=True)
class SliceFile:
    """One file's slices in document order, and the documents (or the file) that could not be read."""

    file: str
    slices: tuple[ResourceSliceDocument, ...] = ()
    errors: tuple[SliceReport, ...] = ()


@dataclass(frozen=True, slots=True)
class SliceScan:
    """What a slice folder publishes for this node.

    `slices`: every slice kept, in published order (those with left-out features included, their
    devices marked). `pools`: the pools at their highest generation, by (driver, pool name) as bytes;
    an incomplete or invalid pool is listed too, flagged. `ignored`: slices read but not used (another
    node's, one selecting nodes by label, a name already used), each with its report. `errors`: slices
    and files ignored because they are bad; `warnings`: slices ignored for another node, left-out
    features, incomplete or invalid pools.
    """

    slices: tuple[ResourceSliceDocument, ...] = ()
    pools: tuple[Pool, ...] = ()
    errors: tuple[SliceReport, ...] = ()
    warnings: tuple[SliceReport, ...] = ()
    ignored: tuple[ResourceSliceDocument, ...] = ()

    def pool(self, driver: str, name: str) -> Pool | None:
        return next((p for p in self.pools if p.driver == driver and p.name == name), None)


def parse_slice_file(file: str, content: bytes) -> SliceFile:
    """Every ResourceSlice of one file; a bad document is reported and the others kept."""
    try:
        docs = load_documents(file, content)
    except ManifestError as err:
        return SliceFile(file, errors=(SliceReport(file, "", str(err)),))
    many = len(docs) > 1
    slices: list[ResourceSliceDocument] = []
    errors: list[SliceReport] = []
    for index, doc in enumerate(docs):
        where = f"document {index + 1}: " if many else ""
        try:
            if not isinstance(doc, Mapping):
                raise DocumentError(f"not an object (a {type(doc).__name__}, not a mapping)", anonymous=True)
            _, version = check_kind(doc, ("ResourceSlice",))
            slices.append(parse_slice(doc, version, file))
        except DocumentError as err:
            meta = doc.get("metadata") if isinstance(doc, Mapping) else None
            name = meta.get("name") if isinstance(meta, Mapping) and not err.anonymous else ""
            name = name if isinstance(name, str) else ""
            errors.append(SliceReport(file, name, f"{where if err.anonymous else ''}{err}"))
    return SliceFile(file, tuple(slices), tuple(errors))


def gather_slices(files: Iterable[SliceFile], node_name: str) -> SliceScan:
    """The slices of `files` (taken in name order) that are this node's, gathered into pools."""
    kept: list[ResourceSliceDocument] = []
    ignored: list[ResourceSliceDocument] = []
    errors: list[SliceReport] = []
    warnings: list[SliceReport] = []
    owner: dict[str, str] = {}
    for f in sorted(files, key=lambda f: f.file):
        errors.extend(f.errors)
        for s in f.slices:
            name = s.meta.name
            if name in owner:
                where = "appears twice" if owner[name] == f.file else f"is already defined by {owner[name]}"
                errors.append(SliceReport(f.file, name, f"ResourceSlice {name} {where}"))
                ignored.append(s)
                continue
            owner[name] = f.file
            if s.node_selector:
                message = "selects its nodes by label (spec.nodeSelector), and this node has none"
                warnings.append(SliceReport(f.file, name, f"ResourceSlice {name}: {message}; ignored"))
                ignored.append(s)
                continue
            if not s.all_nodes and s.node_name and s.node_name != node_name:
                message = f'published for node "{s.node_name}", this node is "{node_name}"; ignored'
                warnings.append(SliceReport(f.file, name, f"ResourceSlice {name}: {message}"))
                ignored.append(s)
                continue
            feature = s.unsupported or next((d.unsupported for d in s.devices if d.unsupported), None)
            if feature is not None:
                text = f"unsupported by kubedevice: {feature} (ResourceSlice {name})"
                warnings.append(SliceReport(f.file, name, text))
            kept.append(s)
    pools = _pools(kept)
    for p in pools:
        where = p.slices[0].meta.source if p.slices else ""
        if p.invalid is not None:
            warnings.append(SliceReport(where, "", f"pool {p.driver}/{p.name}: {p.invalid}"))
        elif not p.complete:
            want = max(s.slice_count for s in p.slices)
            text = (
                f"pool {p.driver}/{p.name}: {len(p.slices)} of {want} slice(s) of generation {p.generation} "
                "published; its devices wait for the others"
            )
            warnings.append(SliceReport(where, "", text))
    return SliceScan(tuple(kept), pools, tuple(errors), tuple(warnings), tuple(ignored))


def _pools(slices: list[ResourceSliceDocument]) -> tuple[Pool, ...]:
    grouped: dict[tuple[str, str], list[ResourceSliceDocument]] = {}
    for s in slices:
        grouped.setdefault((s.driver, s.pool), []).append(s)
    pools: list[Pool] = []
    for (driver, name), members in grouped.items():
        generation = max(s.generation for s in members)
        current = tuple(s for s in members if s.generation == generation)
        complete = all(s.slice_count == len(current) for s in current)
        seen: set[str] = set()
        invalid = None
        for d in (d for s in current for d in s.devices):
            if d.name in seen:
                invalid = f"device {d.name} is published twice in generation {generation}"
                break
            seen.add(d.name)
        pools.append(Pool(driver, name, generation, current, complete, invalid))
    pools.sort(key=lambda p: (p.driver.encode(), p.name.encode()))
    return tuple(pools)


def read_slices(folder: Path, node_name: str) -> SliceScan:
    """Every slice file of `folder` (`.yaml`, `.yml`, `.json`, not hidden), read now. Blocking."""
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
        try:
            content = (folder / name).read_bytes()
        except FileNotFoundError:
            continue  # removed since the listing (a driver's file is replaced by rename)
        except IsADirectoryError:
            continue
        except OSError as err:
            files.append(
                SliceFile(name, errors=(SliceReport(name, "", f"cannot read: {err.strerror or err}"),))
            )
            continue
        files.append(parse_slice_file(name, content))
    return gather_slices(files, node_name)
