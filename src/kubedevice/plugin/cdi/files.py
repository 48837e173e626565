"""CDI spec files on disk: written atomically, read back and checked, removed, and looked up by name.

Runtimes rescan their spec folders whenever a file changes, so a spec is written to a hidden temporary
file and renamed into place: a runtime never reads half a file. The temporary name ends in ``.tmp``,
which runtimes ignore (they read ``*.json`` and ``*.yaml``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubedevice.cdi_names import CDIError
from kubedevice.durable import TempNames, replace_file
from kubedevice.plugin.cdi.spec import CDIDevice, CDISpec, ContainerEdits, DeviceNode, Hook, Mount

#: Where generated specs go (static ones live in /etc/cdi).
DEFAULT_SPEC_DIR = Path("/var/run/cdi")
#: The folders a runtime reads, in the order it reads them (a later one wins a conflict).
DEFAULT_SPEC_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
SPEC_SUFFIXES = (".json", ".yaml")


def spec_from_json(data: Any, source: str = "spec") -> CDISpec:
    """Read a spec's JSON (or YAML) document back, checked; fields this module does not model are dropped."""
    try:
        devices = tuple(
            CDIDevice(name=d["name"], edits=_edits_from_json(d.get("containerEdits") or {}))
            for d in data["devices"]
        )
        return CDISpec(
            kind=data["kind"],
            devices=devices,
            edits=_edits_from_json(data.get("containerEdits") or {}),
            cdi_version=data["cdiVersion"],
        )
    except CDIError as error:
        raise CDIError(f"{source}: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise CDIError(
            f"{source}: not a CDI spec (missing or malformed {error}) — it needs cdiVersion, kind and devices"
        ) from None


def _edits_from_json(data: dict[str, Any]) -> ContainerEdits:
    return ContainerEdits(
        device_nodes=tuple(
            DeviceNode(n["path"], n.get("hostPath", ""), n.get("permissions", ""))
            for n in data.get("deviceNodes") or []
        ),
        env=tuple(data.get("env") or []),
        mounts=tuple(
            Mount(m["hostPath"], m["containerPath"], tuple(m.get("options") or []))
            for m in data.get("mounts") or []
        ),
        hooks=tuple(
            Hook(h["hookName"], h["path"], tuple(h.get("args") or []), tuple(h.get("env") or []))
            for h in data.get("hooks") or []
        ),
    )


def read_spec(path: Path) -> CDISpec:
    """Load and check one spec file (``.json`` or ``.yaml``, as runtimes do)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except OSError as error:
        reason = error.strerror or error
        raise CDIError(f"{path}: cannot read the CDI spec ({reason}) — check the file") from None
    except (ValueError, yaml.YAMLError) as error:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise CDIError(
            f"{path}: not valid {kind} ({str(error).splitlines()[0]}) — fix or remove the file"
        ) from None
    return spec_from_json(data, str(path))


def check_spec_dir(spec_dir: Path) -> None:
    """Refuse a spec folder that cannot be written now: a missing one is created on write, so look upward."""
    existing = spec_dir
    while not os.path.lexists(existing):
        if existing.parent == existing:
            return
        existing = existing.parent
    if not existing.is_dir():
        raise CDIError(f"CDI spec folder {spec_dir}: {existing} is a file, not a folder — give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CDIError(
            f"CDI spec folder {spec_dir} is not writable ({existing}) — run as root or give a writable folder"
        )


def write_spec(spec: CDISpec, spec_dir: Path = DEFAULT_SPEC_DIR, *, file_name: str | None = None) -> Path:
    """Write ``spec`` into ``spec_dir`` (created if missing) atomically; returns the file's path.

    The file is ``spec.file_name()`` unless ``file_name`` names it (one spec per DRA claim, say).
    """
    path = spec_dir / (file_name or spec.file_name())
    # Readable by every runtime, whatever the writer's umask; runtimes skip hidden files while it is written.
    text = json.dumps(spec.to_json(), indent=2) + "\n"
    replace_file(path, text, mode=0o644, temp=TempNames(f".{path.stem}."))
    return path


def remove_spec(spec: CDISpec, spec_dir: Path = DEFAULT_SPEC_DIR) -> None:
    """Remove the spec's file; a file already gone is fine."""
    (spec_dir / spec.file_name()).unlink(missing_ok=True)


@dataclass(frozen=True)
class SpecScan:
    """What the spec files of some folders define, and why each file a runtime would skip is skipped."""

    #: Every fully qualified device name the valid specs define.
    defined: frozenset[str]
    #: One line per spec file a runtime would skip, saying why.
    broken: tuple[str, ...]


def scan_spec_dirs(spec_dirs: tuple[Path, ...] = DEFAULT_SPEC_DIRS) -> SpecScan:
    """Load every spec in ``spec_dirs`` as a runtime does; a broken file defines nothing, as for a runtime."""
    names: set[str] = set()
    broken: list[str] = []
    for directory in spec_dirs:
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.suffix not in SPEC_SUFFIXES or not path.is_file():
                continue
            try:
                names.update(read_spec(path).qualified_names())
            except CDIError as exc:
                broken.append(str(exc))
    return SpecScan(frozenset(names), tuple(broken))


def defined_devices(spec_dirs: tuple[Path, ...] = DEFAULT_SPEC_DIRS) -> set[str]:
    """Every fully qualified name the valid specs in ``spec_dirs`` define."""
    return set(scan_spec_dirs(spec_dirs).defined)
