"""A CDI spec's content and the CDI rules it must follow, checked when it is built.

The rules are those every CDI consumer (containerd, CRI-O, podman) applies when it loads a spec: ``kind``
is ``vendor/class``, vendor and class start with a letter, hold letters, digits, ``_ - .`` and end with a
letter or digit; a device name starts and ends with a letter or digit and may also hold ``:`` inside;
every device edits the container somehow; ``cdiVersion`` is a released version no older than the
features the spec uses. A spec that breaks one is refused with one line naming what and where, because a
consumer would otherwise skip the whole file and every container asking for one of its devices fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kubedevice.cdi_names import (
    CDIError,
    validate_device_name,
    validate_kind,
)

#: The released spec versions a consumer accepts; 0.3.0 is the oldest the CDI libraries still read.
CDI_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")

HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


@dataclass(frozen=True)
class DeviceNode:
    """A device node the container gets: ``path`` inside it, ``host_path`` on the host when they differ."""

    #: The device node's path inside the container; absolute.
    path: str
    #: Its path on the host, when it differs from `path`; absolute (needs cdiVersion 0.5.0).
    host_path: str = ""
    #: The container's cgroup access: letters of "rwm"; empty: the runtime's default ("rwm").
    permissions: str = ""

    def to_json(self) -> dict[str, Any]:
        """The node as the spec file holds it (CDI's JSON field names, empty fields left out)."""
        out: dict[str, Any] = {"path": self.path}
        if self.host_path:
            out["hostPath"] = self.host_path
        if self.permissions:
            out["permissions"] = self.permissions
        return out


@dataclass(frozen=True)
class Mount:
    """A host path mounted into the container by the runtime."""

    #: The path on the host; absolute.
    host_path: str
    #: Where the container sees it; absolute.
    container_path: str
    #: Mount options, e.g. ("ro", "nosuid", "bind").
    options: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The mount as the spec file holds it."""
        out: dict[str, Any] = {"hostPath": self.host_path, "containerPath": self.container_path}
        if self.options:
            out["options"] = list(self.options)
        return out


@dataclass(frozen=True)
class Hook:
    """An OCI hook the runtime runs at ``hook_name`` (one of HOOK_NAMES)."""

    #: When it runs: prestart, createRuntime, createContainer, startContainer, poststart or poststop.
    hook_name: str
    #: The program; absolute.
    path: str
    #: Its full argument list, argv[0] included.
    args: tuple[str, ...] = ()
    #: Its environment, as NAME=value entries.
    env: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The hook as the spec file holds it."""
        out: dict[str, Any] = {"hookName": self.hook_name, "path": self.path}
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = list(self.env)
        return out


@dataclass(frozen=True)
class ContainerEdits:
    """What the runtime changes in a container that gets a device (or any device of the spec)."""

    #: Device nodes the container gets.
    device_nodes: tuple[DeviceNode, ...] = ()
    #: Environment variables, as NAME=value entries.
    env: tuple[str, ...] = ()
    #: Host paths mounted into the container.
    mounts: tuple[Mount, ...] = ()
    #: OCI hooks the runtime runs for the container.
    hooks: tuple[Hook, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.device_nodes or self.env or self.mounts or self.hooks)

    def to_json(self) -> dict[str, Any]:
        """The edits as the spec file holds them (`containerEdits`)."""
        out: dict[str, Any] = {}
        if self.env:
            out["env"] = list(self.env)
        if self.device_nodes:
            out["deviceNodes"] = [node.to_json() for node in self.device_nodes]
        if self.hooks:
            out["hooks"] = [hook.to_json() for hook in self.hooks]
        if self.mounts:
            out["mounts"] = [mount.to_json() for mount in self.mounts]
        return out


@dataclass(frozen=True)
class CDIDevice:
    """One device of a spec: its name (the part after ``=``) and what a container using it gets."""

    #: The device's name within its kind; an Allocate answer names it as `kind=name`.
    name: str
    #: What a container using the device gets; must edit something.
    edits: ContainerEdits = field(default_factory=ContainerEdits)


@dataclass(frozen=True)
class CDISpec:
    """One spec file's content: ``kind`` (vendor/class), its devices and the edits common to all of them.

    ``cdi_version`` left empty becomes the oldest version that holds what the spec uses, so the file is
    readable by the oldest runtime that can use it.
    """

    #: vendor/class, e.g. "example.com/gpu"; the file is named after it.
    kind: str
    #: The devices it defines: at least one, names unique.
    devices: tuple[CDIDevice, ...]
    #: Edits every container using any device of the spec gets.
    edits: ContainerEdits = field(default_factory=ContainerEdits)
    #: The spec's cdiVersion; empty: the oldest that holds what the spec uses.
    cdi_version: str = ""

    def __post_init__(self) -> None:
        needed = _validate(self)
        if not self.cdi_version:
            object.__setattr__(self, "cdi_version", needed)
        elif self.cdi_version not in CDI_VERSIONS:
            raise CDIError(
                f"cdiVersion {self.cdi_version!r} of kind {self.kind!r} is not a CDI version — use one of "
                f"{', '.join(CDI_VERSIONS)}, or leave it empty"
            )
        elif _version_key(self.cdi_version) < _version_key(needed):
            raise CDIError(
                f"cdiVersion {self.cdi_version} of kind {self.kind!r} is too old for what the spec uses — "
                f"use {needed} or newer, or leave it empty"
            )

    def qualified_name(self, device: str) -> str:
        """``vendor/class=device`` for a device this spec defines: the name an Allocate answer carries."""
        if device not in self._device_names:
            raise CDIError(
                f"CDI device {device!r} is not defined by the spec of kind {self.kind!r} — "
                "add it to the spec's devices"
            )
        return f"{self.kind}={device}"

    def qualified_names(self, devices: Iterable[str] | None = None) -> list[str]:
        """The qualified names of ``devices`` (device names of this spec), or of every device it defines."""
        if devices is None:
            return [f"{self.kind}={d.name}" for d in self.devices]
        return [self.qualified_name(device) for device in devices]

    @cached_property
    def _device_names(self) -> frozenset[str]:
        # Built once per spec, not once per name an Allocate answer asks for.
        return frozenset(d.name for d in self.devices)

    def file_name(self) -> str:
        """``vendor-class.json``, the naming the CDI tooling uses for a generated spec."""
        return self.kind.replace("/", "-") + ".json"

    def to_json(self) -> dict[str, Any]:
        """The spec file's whole document (what `write_spec` writes as JSON)."""
        out: dict[str, Any] = {
            "cdiVersion": self.cdi_version,
            "kind": self.kind,
            # containerEdits is required on a device, not on the spec.
            "devices": [{"name": d.name, "containerEdits": d.edits.to_json()} for d in self.devices],
        }
        if self.edits:
            out["containerEdits"] = self.edits.to_json()
        return out


def _validate(spec: CDISpec) -> str:
    """Check every rule; return the oldest cdiVersion that holds what the spec uses."""
    needed = "0.3.0"
    _, device_class = validate_kind(spec.kind)
    if not spec.devices:
        raise CDIError(f"CDI spec of kind {spec.kind!r} defines no device — add at least one")
    seen: set[str] = set()
    for device in spec.devices:
        validate_device_name(device.name)
        if device.name in seen:
            raise CDIError(
                f"CDI device {device.name!r} is defined twice in the spec of kind {spec.kind!r} — "
                "give each device its own name"
            )
        seen.add(device.name)
        if not device.edits:
            raise CDIError(
                f"CDI device {device.name!r} of kind {spec.kind!r} edits nothing — give it a device node, "
                "an env entry, a mount or a hook (runtimes refuse a spec with such a device)"
            )
        _validate_edits(device.edits, f"device {device.name!r}")
        if device.name[0].isdigit():
            needed = max(needed, "0.5.0")
    _validate_edits(spec.edits, "the spec's containerEdits")
    if any(node.host_path for d in spec.devices for node in d.edits.device_nodes) or any(
        node.host_path for node in spec.edits.device_nodes
    ):
        needed = max(needed, "0.5.0")
    if "." in device_class:
        needed = "0.6.0"
    return needed


def _validate_edits(edits: ContainerEdits, where: str) -> None:
    for node in edits.device_nodes:
        for path in (node.path, node.host_path):
            if path and not path.startswith("/"):
                raise CDIError(f"CDI deviceNode path {path!r} of {where} is not absolute — start it with '/'")
        if not node.path:
            raise CDIError(f"CDI deviceNode of {where} has no path — give the path inside the container")
        if not set(node.permissions) <= set("rwm"):
            raise CDIError(
                f"CDI deviceNode permissions {node.permissions!r} of {where} are invalid — "
                "use letters of 'rwm'"
            )
    _validate_env(edits.env, where)
    for mount in edits.mounts:
        for path in (mount.host_path, mount.container_path):
            if not path.startswith("/"):
                raise CDIError(
                    f"CDI mount path {path!r} of {where} is not absolute — give an absolute hostPath "
                    "and containerPath"
                )
    for hook in edits.hooks:
        if hook.hook_name not in HOOK_NAMES:
            raise CDIError(
                f"CDI hook {hook.hook_name!r} of {where} is unknown — use one of {', '.join(HOOK_NAMES)}"
            )
        if not hook.path.startswith("/"):
            raise CDIError(f"CDI hook path {hook.path!r} of {where} is not absolute — start it with '/'")
        _validate_env(hook.env, f"hook {hook.hook_name!r} of {where}")


def _validate_env(env: tuple[str, ...], where: str) -> None:
    for variable in env:
        if not isinstance(variable, str) or variable.find("=") <= 0:
            raise CDIError(f"CDI env entry {variable!r} of {where} is not NAME=value — write it so")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
