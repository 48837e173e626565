"""The manifest folder as the daemon sees it: every file's pods and DRA documents, a file read again only
when it changed.

A full scan lists the folder (one `stat` per unchanged file). A scan of named files (those the folder
watch reported) looks at those files only, so a burst of N new manifests costs O(N) in all rather than a
listing of the whole folder per event; the daemon still scans in full now and then, as a safety net.
Either way a pod's UID and its namespace/name belong to one file: the pod already known (running) wins,
then the first file in name order; the file that loses is reported, and looked at again by every scan
until the clash is gone. A DRA document (claim, template, class, namespace) belongs to one file too: the
first file in name order wins and the other files are refused the same way. The DRA documents of a scan
are always the whole folder's, whichever files it looked at.

`scan()` does blocking file I/O: call it in a thread. It gives up the GIL every half millisecond of
parsing, so the event loop's thread is not kept waiting for it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kubedevice.controlplane.folder_index import DRAFolderIndex
from kubedevice.node.manifests import ManifestFile, PodManifest, parse_file
from kubedevice.resource.document_file import (
    MANIFEST_SUFFIXES,
    ManifestError,
    broken_symlink,
    read_document_file,
)
from kubedevice.resource.model import DRADocuments, SelectorCompiler
from kubedevice.wording import failure_line

log = logging.getLogger(__name__)

#: At most this long (s) of parsing between two hand-overs of the GIL to the event loop's thread.
_GIL_SLICE = 0.0005


@dataclass(slots=True)
class ScanResult:
    """The pods (in file-name order) and the files that could not be used, among the files `covered`
    (None: the whole folder). A covered file with neither pods nor an error is gone.

    `dra` is the whole folder's DRA documents after this scan, the same object as the previous scan's
    when none of them changed (`dra_changed` False)."""

    pods: list[PodManifest] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    covered: frozenset[str] | None = None
    #: False when the folder could not be listed (its error is in `errors`): the scan says nothing about
    #: the pods, as the kubelet's file source sends no update then.
    listed: bool = True
    dra: DRADocuments = field(default_factory=DRADocuments)
    dra_changed: bool = False


@dataclass(slots=True)
class _Cached:
    key: tuple[int, int, int]
    digest: bytes
    parsed: ManifestFile | None
    error: str | None


def is_manifest_name(name: str) -> bool:
    """A file the folder's pods are read from: not hidden (editors' temporary files), a known suffix."""
    return not name.startswith(".") and name.endswith(MANIFEST_SUFFIXES)


class ManifestFolder:
    """Reads a manifest folder, re-parsing only the files whose size, mtime or content changed."""

    def __init__(
        self, folder: Path, *, allow_symlinks: bool = False, selector_compiler: SelectorCompiler | None = None
    ) -> None:
        self.folder = folder
        self.allow_symlinks = allow_symlinks
        #: Checks the CEL selectors of DRA documents as they are read (None: not checked).
        self.selector_compiler = selector_compiler
        self._cache: dict[str, _Cached] = {}
        #: The pods each file gives now, and the file holding each UID and each namespace/name.
        self._accepted: dict[str, list[PodManifest]] = {}
        self._uid_owner: dict[str, str] = {}
        self._name_owner: dict[tuple[str, str], str] = {}
        #: Files refused for a clash with another file's pod.
        self._clashing: set[str] = set()
        #: When parsing last gave up the GIL (monotonic seconds).
        self._gil_given_at = 0.0
        #: Every readable file's DRA documents (those of refused files included).
        self._dra = DRAFolderIndex()
        #: Every file of the folder refused now: what DRADocuments.errors reports.
        self._errors: dict[str, str] = {}

    def scan(self, known_uids: Collection[str] = (), names: Iterable[str] | None = None) -> ScanResult:
        """The whole folder's pods, or with `names` those files' only (and the clashing files').

        On a UID or name clash the pod in `known_uids` (already running) wins.
        """
        if names is None:
            result = self._scan_all()
        else:
            wanted = {n for n in names if is_manifest_name(n)} | self._clashing | set(self._dra.clashing)
            result = self._scan_names(sorted(wanted))
        if not result.listed:
            # Nothing is known of the files: what the last scan found stands.
            result.dra, result.dra_changed = self._dra.documents(frozenset(self._errors), self._errors)
            return result
        self._check_dra_clashes(result)
        self._check_clashes(result, known_uids)
        self._collect_dra(result)
        if log.isEnabledFor(logging.DEBUG):
            looked = (
                "every file" if result.covered is None else f"{len(result.covered)} file(s) the watch named"
            )
            log.debug(
                "manifest scan of %s (%s): %d pod(s), %d file(s) refused",
                self.folder,
                looked,
                len(result.pods),
                len(result.errors),
            )
        return result

    def _scan_all(self) -> ScanResult:
        result = ScanResult()
        try:
            # scandir: the entry's type comes with the listing, so an unchanged file costs one stat.
            with os.scandir(self.folder) as listing:
                entries = sorted(listing, key=_entry_name)
        except FileNotFoundError:
            entries = []
        except OSError as err:
            result.errors[str(self.folder)] = f"cannot list the manifest folder: {err.strerror or err}"
            result.listed = False
            return result
        real_folder = os.path.realpath(self.folder)
        seen: set[str] = set()
        for entry in entries:
            name = entry.name
            if not is_manifest_name(name):
                continue
            seen.add(name)
            self._add(result, name, self._read(name, entry.path, entry.is_symlink(), real_folder))
        for gone in set(self._cache) - seen:
            del self._cache[gone]
        for gone in set(self._dra.files()) - seen:
            self._dra.set_file(gone, [])
        return result

    def _scan_names(self, names: list[str]) -> ScanResult:
        result = ScanResult(covered=frozenset(names))
        real_folder = os.path.realpath(self.folder)
        for name in names:
            path = os.path.join(self.folder, name)
            try:
                symlink = stat.S_ISLNK(os.lstat(path).st_mode)
            except FileNotFoundError:  # gone: it gives no pods
                self._cache.pop(name, None)
                self._dra.set_file(name, [])
                continue
            except OSError as err:
                result.errors[name] = f"cannot read: {err.strerror or err}"
                continue
            self._add(result, name, self._read(name, path, symlink, real_folder))
        return result

    def _add(self, result: ScanResult, name: str, read: tuple[ManifestFile | None, str | None]) -> None:
        parsed, error = read
        if error is not None or parsed is None:
            result.errors[name] = error or "cannot read"
            self._dra.set_file(name, [])
        else:
            result.pods.extend(parsed.pods)
            self._dra.set_file(name, parsed.dra)

    def _read(
        self, name: str, path: str, symlink: bool, real_folder: str
    ) -> tuple[ManifestFile | None, str | None]:
        if symlink and not self.allow_symlinks:
            target = os.path.realpath(path)
            if os.path.commonpath([target, real_folder]) != real_folder:
                self._cache.pop(name, None)
                return None, f"symlink to {target} points outside the manifest folder (see --allow-symlinks)"
        try:
            st = os.stat(path)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            cached = self._cache.get(name)
            if cached is not None and cached.key == key:
                return cached.parsed, cached.error
            # A FIFO, a device or a socket is refused here, never opened for reading; the size is capped.
            content = read_document_file(path)
        except FileNotFoundError:
            self._cache.pop(name, None)
            return None, broken_symlink(path) or "the file vanished while it was read"
        except ManifestError as err:
            self._cache.pop(name, None)
            return None, str(err)
        except OSError as err:
            return None, f"cannot read: {err.strerror or err}"
        digest = hashlib.sha256(content).digest()
        if cached is not None and cached.digest == digest:
            cached.key = key
            return cached.parsed, cached.error
        try:
            # The folder is flat: the file's name is its path relative to the folder, part of each UID.
            parsed: ManifestFile | None = parse_file(name, content, name, self.selector_compiler)
            error = None
        except ManifestError as err:
            parsed, error = None, str(err)
        except Exception as err:  # one file's failure is that file's error, never the scan's
            parsed, error = None, f"cannot be read: {failure_line(err)}"
        self._cache[name] = _Cached(key, digest, parsed, error)
        # Let another thread take the GIL: parsing is pure Python, and without this a scan of many new
        # files holds the GIL for a whole switch interval (5 ms) each time the event loop wakes up, which
        # delays every plugin call's answer that much (~7 ms per Allocate instead of ~1 ms). Every half
        # millisecond rather than after every file: the answers wait no longer, the scan goes twice as fast.
        now = time.monotonic()
        if now - self._gil_given_at >= _GIL_SLICE:
            time.sleep(0)
            self._gil_given_at = time.monotonic()
        return parsed, error

    def _check_dra_clashes(self, result: ScanResult) -> None:
        """A DRA document (or a class's extendedResourceName) that an earlier file in name order defines
        refuses its file, pods included; a file whose refusal starts or ends is added to the scan."""
        changed = self._dra.clashes()
        clashing = self._dra.clashing
        if result.covered is not None and changed:
            result.covered = result.covered | (changed & set(self._dra.files()))
        for file, error in clashing.items():
            result.errors[file] = error
        if clashing:
            result.pods = [m for m in result.pods if m.file not in clashing]

    def _collect_dra(self, result: ScanResult) -> None:
        """The folder's DRA documents: those of every file not refused now."""
        if result.covered is None:
            self._errors = dict(result.errors)
        else:
            for file in result.covered:
                self._errors.pop(file, None)
            self._errors.update(result.errors)
        result.dra, result.dra_changed = self._dra.documents(frozenset(self._errors), self._errors)

    def _check_clashes(self, result: ScanResult, known_uids: Collection[str]) -> None:
        """A UID or namespace/name already held by a known pod, another file or an earlier file of the
        result makes a bad file; what the result's files held before is given up first."""
        if result.covered is None:
            self._accepted.clear()
            self._uid_owner.clear()
            self._name_owner.clear()
            self._clashing.clear()
        else:
            for file in result.covered:
                self._withdraw(file, self._accepted.pop(file, ()))
            self._clashing -= result.covered
        known = set(known_uids)
        bad: dict[str, str] = {}
        for m in sorted(result.pods, key=lambda m: m.uid not in known):
            key = (m.pod.namespace, m.pod.name)
            other = self._uid_owner.get(m.uid) or self._name_owner.get(key)
            if other is not None and other != m.file:
                bad.setdefault(m.file, f"pod {key[0]}/{key[1]} (uid {m.uid}) is already defined by {other}")
                continue
            self._uid_owner[m.uid] = m.file
            self._name_owner[key] = m.file
        if bad:
            for file in bad:
                self._withdraw(file, [m for m in result.pods if m.file == file])
            result.pods = [m for m in result.pods if m.file not in bad]
            result.errors.update(bad)
            self._clashing.update(bad)
        for m in result.pods:
            self._accepted.setdefault(m.file, []).append(m)

    def _withdraw(self, file: str, pods: Iterable[PodManifest]) -> None:
        for m in pods:
            if self._uid_owner.get(m.uid) == file:
                del self._uid_owner[m.uid]
            key = (m.pod.namespace, m.pod.name)
            if self._name_owner.get(key) == file:
                del self._name_owner[key]


def _entry_name(entry: os.DirEntry[str]) -> str:
    return entry.name
