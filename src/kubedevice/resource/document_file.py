"""One manifest file's bytes as decoded documents: JSON or YAML (libyaml when there), `kind: List` flattened.
Shared by the manifest folder's pods and DRA documents and by the ResourceSlice folder.

A file that is not YAML is refused in one line that says where and what (`YAML error at line 8, column
11: mapping values are not allowed here`), or that it looks like a Helm template, which must be rendered
before it is a manifest. What is read at all is bounded (kubedevice.resource.document_limits): only a
regular file, its size, each document's size, depth and alias expansion; past a limit is one line too."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from typing import Any

from kubedevice.resource.document_limits import (
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    MAX_FILE_BYTES,
    LimitError,
    check_depth,
    read_regular_file,
)

__all__ = [
    "MANIFEST_SUFFIXES",
    "ManifestError",
    "broken_symlink",
    "is_whole_at_creation",
    "load_documents",
    "read_document_file",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(ValueError):
    """Why a manifest file cannot be used; str() is one line naming the problem."""


def is_whole_at_creation(path: str | os.PathLike[str]) -> bool:
    """Whether a folder watch's CREATE of `path` means it can be read now: anything but a regular file (a
    symlink, a FIFO, a socket, a device) is whole when it is created, and gets no CLOSE_WRITE after it;
    a regular file may be half written, and its writer's close is reported."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return True


def broken_symlink(path: str | os.PathLike[str]) -> str | None:
    """Why a path that `stat` did not find cannot be read, when it is a symlink whose target does not
    exist (one line); None when nothing is there (the file was removed)."""
    if not os.path.islink(path):
        return None
    return f"symlink to {os.path.realpath(path)}, which does not exist"


def read_document_file(path: str | os.PathLike[str]) -> bytes:
    """A manifest file's bytes: a regular file (symlinks followed) within the size limit. Raises
    ManifestError (a FIFO, a device, a socket, too large) or OSError (cannot be read)."""
    try:
        return read_regular_file(path)
    except LimitError as err:
        raise ManifestError(str(err)) from None


def load_documents(file_name: str, content: bytes) -> list[Any]:
    """The decoded documents of one file (`.json`: one document; YAML: all of them), `kind: List`
    flattened into its items. Raises ManifestError when the file cannot be read as such, or is past a
    limit of kubedevice.resource.document_limits."""
    if len(content) > MAX_FILE_BYTES:
        raise ManifestError(f"larger than the {MAX_FILE_BYTES // (1024 * 1024)} MiB limit of a manifest file")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(f"not UTF-8 text: {err}") from None
    try:
        docs = _load_json(text, len(content)) if file_name.endswith(".json") else _load_yaml(text)
    except LimitError as err:
        raise ManifestError(str(err)) from None
    flat: list[Any] = []
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            flat.extend(doc["items"])
        else:
            flat.append(doc)
    return flat


def _load_json(text: str, size: int) -> list[Any]:
    """The file's one JSON document, within the depth limit and, unless a `kind: List`, the size limit of
    one object."""
    try:
        docs: list[Any] = [json.loads(text)] if text.strip() else []
    except json.JSONDecodeError as err:
        raise ManifestError(f"JSON error: {' '.join(str(err).split())}") from None
    except RecursionError:
        raise LimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    for doc in docs:
        check_depth(doc)
        if size > MAX_DOCUMENT_BYTES and not (isinstance(doc, Mapping) and doc.get("kind") == "List"):
            raise LimitError(
                f"a JSON document larger than the {MAX_DOCUMENT_BYTES / (1024 * 1024):g} MiB "
                "limit of one object"
            )
    return docs


#: A text libyaml refuses is read again by PyYAML's own loader, whose words the errors use, up to this
#: size (every manifest written by hand); a larger one keeps libyaml's words. Pure Python reads about eight
#: times slower: half a second at this size, and 40 s of the scan's thread for 3 MiB of small nodes.
PURE_WORDING_BYTES = 64 * 1024


def _load_yaml(text: str) -> list[Any]:
    """The file's non-empty YAML documents, read by libyaml when PyYAML has it (several times faster),
    plain documents built in one walk (kubedevice.resource.plain_yaml).

    libyaml words its errors differently, so a file it rejects is read again by the pure loader when it is
    small (PURE_WORDING_BYTES): the documents or the error reported are then the pure loader's.
    """
    # Here: the daemon serves before any YAML is read.
    import yaml

    from kubedevice.resource.plain_yaml import CHECKED_SAFE_LOADER as pure
    from kubedevice.resource.plain_yaml import PLAIN_LOADER as fast

    if fast is not None:
        try:
            return [d for d in yaml.load_all(text, Loader=fast) if d is not None]
        except yaml.YAMLError as err:
            if getattr(err, "problem", None) == "exceeded maximum nesting depth":  # libyaml's 1,000 levels
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels") from None
            if len(text) > PURE_WORDING_BYTES:
                raise _refusal(err, text) from None
    try:
        return [d for d in yaml.load_all(text, Loader=pure) if d is not None]
    except RecursionError:
        # PyYAML's composer recurses once per level: past Python's limit before a document is measured.
        raise LimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as err:
        raise _refusal(err, text) from None


def _refusal(err: Exception, text: str) -> ManifestError:
    """A YAML error as the file's one line, or the Helm template the text looks like."""
    template = _template_mark(text)
    if template is not None:
        return ManifestError(
            f"looks like a Helm template ({{{{ at line {template[0]}, column {template[1]}) — "
            "render it with `helm template` first"
        )
    return ManifestError(_yaml_error(err, text))


def _yaml_error(err: Exception, text: str) -> str:
    """PyYAML's error in one line: `YAML error at line 8, column 11: mapping values are not allowed here`,
    and where the construct it was reading began when that is elsewhere (lines and columns from 1)."""
    import yaml

    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        at = err.problem_mark
        # PyYAML's end of the stream is on the line after a final newline, which the file does not show.
        where = (
            "the end of the file" if at.index >= len(text) else f"line {at.line + 1}, column {at.column + 1}"
        )
        line = f"YAML error at {where}: {err.problem}"
        began = err.context_mark
        if err.context and began is not None and began.index != at.index:
            line += f" ({err.context} at line {began.line + 1}, column {began.column + 1})"
        return line + (f"; {err.note}" if err.note else "")
    if isinstance(err, yaml.reader.ReaderError):
        # A character YAML does not allow (a NUL, a control character): where it is, in the text.
        row = text.count("\n", 0, err.position) + 1
        column = err.position - (text.rfind("\n", 0, err.position) + 1) + 1
        code = err.character if isinstance(err.character, int) else ord(err.character)
        what = f"unacceptable character #x{code:04x}: {err.reason}"
        return f"YAML error at line {row}, column {column}: {what}"
    return f"YAML error: {' '.join(str(err).split())}"


def _template_mark(text: str) -> tuple[int, int] | None:
    """Where a text that is not YAML shows a Helm template's action: the first `{{` outside a quoted
    string and a comment, or any `{{-`; None when it has neither. Lines and columns from 1."""
    if "{{" not in text:
        return None
    for row, line in enumerate(text.splitlines(), 1):
        quote = ""
        for column, char in enumerate(line):
            if line.startswith("{{-", column) or (not quote and line.startswith("{{", column)):
                return row, column + 1
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#" and (column == 0 or line[column - 1].isspace()):
                break
    return None
