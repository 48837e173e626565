"""CDI (Container Device Interface) spec files: build, validate, write atomically, remove.

A plugin that answers Allocate with CDI device names must have a spec file defining them in a folder the
container runtime reads (``/etc/cdi``, ``/var/run/cdi``). The rules checked here are those of the CDI
specification: ``kind`` is ``vendor/class`` (vendor a domain-like name, class a simple name), a device name
is alphanumerics with ``_ - . :`` inside, and a fully qualified name is ``vendor/class=name``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Where the runtime looks for dynamically generated specs (static ones live in /etc/cdi).
DEFAULT_SPEC_DIR = Path("/var/run/cdi")
#: The folders a runtime reads, in the order it reads them.
DEFAULT_SPEC_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
#: The released CDI spec versions; 0.6.0 is the oldest that every current runtime reads.
CDI_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0")
DEFAULT_CDI_VERSION = "0.6.0"

_VENDOR = re.compile(r"^[A-Za-z](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_CLASS = re.compile(r"^[A-Za-z](?:[A-Za-z0-9_-]*[A-Za-z0-9])?$")
_DEVICE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
_HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


class CDIError(ValueError):
    """A spec or a name that breaks the CDI rules; the message is one line naming what and where."""


@dataclass(frozen=True)
class DeviceNode:
    path: str
    host_path: str = ""
    permissions: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.host_path:
            out["hostPath"] = self.host_path
        if self.permissions:
            out["permissions"] = self.permissions
        return out


@dataclass(frozen=True)
class Mount:
    host_path: str
    container_path: str
    options: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hostPath": self.host_path, "containerPath": self.container_path}
        if self.options:
            out["options"] = list(self.options)
        return out


@dataclass(frozen=True)
class Hook:
    hook_name: str
    path: str
    args: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hookName": self.hook_name, "path": self.path}
        if self.args:
            out["args"] = list(self.args)
        return out


@dataclass(frozen=True)
class ContainerEdits:
    device_nodes: tuple[DeviceNode, ...] = ()
    env: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    hooks: tuple[Hook, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.device_nodes:
            out["deviceNodes"] = [node.to_json() for node in self.device_nodes]
        if self.env:
            out["env"] = list(self.env)
        if self.mounts:
            out["mounts"] = [mount.to_json() for mount in self.mounts]
        if self.hooks:
            out["hooks"] = [hook.to_json() for hook in self.hooks]
        return out


@dataclass(frozen=True)
class CDIDevice:
    name: str
    edits: ContainerEdits = field(default_factory=ContainerEdits)


@dataclass(frozen=True)
class CDISpec:
    """One spec file's content: ``kind`` (vendor/class), its devices and the edits common to all of them."""

    kind: str
    devices: tuple[CDIDevice, ...]
    edits: ContainerEdits = field(default_factory=ContainerEdits)
    cdi_version: str = DEFAULT_CDI_VERSION

    def __post_init__(self) -> None:
        validate_spec(self)

    def qualified_name(self, device: str) -> str:
        """``vendor/class=device`` for a device this spec defines: the name an Allocate answer carries."""
        if device not in {d.name for d in self.devices}:
            raise CDIError(f"CDI device {device!r} is not defined by the spec of kind {self.kind!r}")
        return f"{self.kind}={device}"

    def qualified_names(self) -> list[str]:
        return [f"{self.kind}={d.name}" for d in self.devices]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cdiVersion": self.cdi_version,
            "kind": self.kind,
            "devices": [{"name": d.name, "containerEdits": d.edits.to_json()} for d in self.devices],
        }
        common = self.edits.to_json()
        if common:
            out["containerEdits"] = common
        return out

    def file_name(self) -> str:
        """``vendor-class.json``, the naming the CDI tooling uses for a generated spec."""
        return self.kind.replace("/", "-") + ".json"


def validate_kind(kind: str) -> None:
    vendor, slash, cls = kind.partition("/")
    if not slash:
        raise CDIError(f"CDI kind {kind!r} is not vendor/class — write it as e.g. 'example.com/gpu'")
    if not _VENDOR.match(vendor):
        raise CDIError(
            f"CDI vendor {vendor!r} in kind {kind!r} is invalid — start with a letter, use letters, digits, "
            "'.', '-', '_', end with a letter or digit"
        )
    if not _CLASS.match(cls):
        raise CDIError(
            f"CDI class {cls!r} in kind {kind!r} is invalid — start with a letter, use letters, digits, "
            "'-', '_', end with a letter or digit"
        )


def validate_device_name(name: str) -> None:
    if not _DEVICE.match(name):
        raise CDIError(
            f"CDI device name {name!r} is invalid — use letters, digits, '_', '-', '.', ':', "
            "starting and ending with a letter or digit"
        )


def parse_qualified_name(name: str) -> tuple[str, str]:
    """``vendor/class=device`` → (kind, device), checked."""
    kind, equals, device = name.partition("=")
    if not equals:
        raise CDIError(f"CDI device {name!r} is not fully qualified — write it as vendor/class=name")
    validate_kind(kind)
    validate_device_name(device)
    return kind, device


def validate_spec(spec: CDISpec) -> None:
    if spec.cdi_version not in CDI_VERSIONS:
        raise CDIError(
            f"cdiVersion {spec.cdi_version!r} is not a CDI version — use one of {', '.join(CDI_VERSIONS)}"
        )
    validate_kind(spec.kind)
    if not spec.devices:
        raise CDIError(f"CDI spec of kind {spec.kind!r} defines no device — add at least one")
    seen: set[str] = set()
    for device in spec.devices:
        validate_device_name(device.name)
        if device.name in seen:
            raise CDIError(f"CDI device {device.name!r} is defined twice in the spec of kind {spec.kind!r}")
        seen.add(device.name)
        _validate_edits(device.edits, f"device {device.name!r}")
    _validate_edits(spec.edits, "the spec's containerEdits")


def _validate_edits(edits: ContainerEdits, where: str) -> None:
    for node in edits.device_nodes:
        if not node.path.startswith("/"):
            raise CDIError(
                f"CDI deviceNode path {node.path!r} of {where} is not absolute — start it with '/'"
            )
        if node.permissions and not set(node.permissions) <= set("rwm"):
            raise CDIError(
                f"CDI deviceNode permissions {node.permissions!r} of {where} — use letters of 'rwm'"
            )
    for variable in edits.env:
        if "=" not in variable or variable.startswith("="):
            raise CDIError(f"CDI env entry {variable!r} of {where} is not NAME=value")
    for mount in edits.mounts:
        if not mount.host_path or not mount.container_path.startswith("/"):
            raise CDIError(
                f"CDI mount {mount.host_path!r} → {mount.container_path!r} of {where} — "
                "give a hostPath and an absolute containerPath"
            )
    for hook in edits.hooks:
        if hook.hook_name not in _HOOK_NAMES:
            raise CDIError(
                f"CDI hook {hook.hook_name!r} of {where} is unknown — use one of {', '.join(_HOOK_NAMES)}"
            )
        if not hook.path.startswith("/"):
            raise CDIError(f"CDI hook path {hook.path!r} of {where} is not absolute — start it with '/'")


def spec_from_json(data: Any, source: str = "spec") -> CDISpec:
    """Read a spec's JSON back (the round-trip of :meth:`CDISpec.to_json`), checked."""
    try:
        devices = tuple(
            CDIDevice(name=d["name"], edits=_edits_from_json(d.get("containerEdits", {})))
            for d in data["devices"]
        )
        return CDISpec(
            kind=data["kind"],
            devices=devices,
            edits=_edits_from_json(data.get("containerEdits", {})),
            cdi_version=data["cdiVersion"],
        )
    except CDIError as error:
        raise CDIError(f"{source}: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise CDIError(
            f"{source}: not a CDI spec (missing or malformed {error}) — see cdiVersion, kind, devices"
        ) from None


def _edits_from_json(data: dict[str, Any]) -> ContainerEdits:
    return ContainerEdits(
        device_nodes=tuple(
            DeviceNode(n["path"], n.get("hostPath", ""), n.get("permissions", ""))
            for n in data.get("deviceNodes", [])
        ),
        env=tuple(data.get("env", [])),
        mounts=tuple(
            Mount(m["hostPath"], m["containerPath"], tuple(m.get("options", [])))
            for m in data.get("mounts", [])
        ),
        hooks=tuple(Hook(h["hookName"], h["path"], tuple(h.get("args", []))) for h in data.get("hooks", [])),
    )


def read_spec(path: Path) -> CDISpec:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CDIError(
            f"{path}: cannot read a CDI spec ({error.__class__.__name__}) — check the file"
        ) from None
    return spec_from_json(data, str(path))


def write_spec(spec: CDISpec, spec_dir: Path = DEFAULT_SPEC_DIR) -> Path:
    """Write ``spec`` into ``spec_dir`` atomically (a runtime never reads half a file); returns the path."""
    spec_dir.mkdir(parents=True, exist_ok=True)
    path = spec_dir / spec.file_name()
    fd, temp = tempfile.mkstemp(dir=spec_dir, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(spec.to_json(), handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def remove_spec(spec: CDISpec, spec_dir: Path = DEFAULT_SPEC_DIR) -> None:
    """Remove the spec file when the plugin stops; a file already gone is fine."""
    (spec_dir / spec.file_name()).unlink(missing_ok=True)


def defined_devices(spec_dirs: tuple[Path, ...] = DEFAULT_SPEC_DIRS) -> set[str]:
    """Every fully qualified CDI name the ``*.json`` specs in ``spec_dirs`` define (bad files skipped)."""
    names: set[str] = set()
    for directory in spec_dirs:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.json")):
            try:
                names.update(read_spec(path).qualified_names())
            except CDIError:
                continue
    return names
