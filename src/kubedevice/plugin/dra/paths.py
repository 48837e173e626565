"""Names and paths of a DRA driver on a node: all derived from one kubelet directory.

The layout is the kubelet's (and the node daemon's ``--root-dir``):
``<kubelet_dir>/plugins_registry/<driver>-reg.sock`` for registration,
``<kubelet_dir>/plugins/<driver>/dra.sock`` for the DRA services, beside the SDK's state file and the
lock shared by the instances of a rolling update. CDI spec files go where the runtimes read them, unless
the kubelet directory is a try-out's (`cdi_spec_dir`).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kubedevice.plugin.cdi.files import DEFAULT_SPEC_DIR
from kubedevice.plugin.errors import ConfigError

log = logging.getLogger(__name__)

#: Where the kubelet keeps its state, unless told otherwise.
DEFAULT_KUBELET_DIR = "/var/lib/kubelet"
#: The environment variable naming the kubelet directory (the argument wins over it).
KUBELET_DIR_ENV = "KUBEDEVICE_KUBELET_DIR"
#: The SDK's record of prepared claims, in the driver's plugin folder.
STATE_FILE_NAME = "kubedevice-dra-state.json"
#: The lock file serialising prepare/unprepare across the instances of a rolling update.
LOCK_FILE_NAME = "serialize.lock"
#: The longest unix socket path the kernel accepts (sun_path holds 108 bytes with its NUL).
MAX_SOCKET_PATH = 108

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
#: The API's limit for a driver name (shorter than a DNS subdomain's 253).
MAX_DRIVER_NAME = 63


def check_driver_name(name: str) -> str:
    """A driver name is a DNS subdomain of at most 63 characters (``gpu.example.com``)."""
    if not isinstance(name, str) or not name:
        raise ConfigError("driver_name is empty — set it to a DNS subdomain such as gpu.example.com")
    if len(name) > MAX_DRIVER_NAME:
        raise ConfigError(
            f"driver name {name!r} has {len(name)} characters, more than {MAX_DRIVER_NAME} — shorten it"
        )
    if not all(_DNS_LABEL.fullmatch(label) for label in name.split(".")):
        raise ConfigError(
            f"driver name {name!r} is not a DNS subdomain — use lower-case letters, digits, '-' and '.', "
            "e.g. gpu.example.com"
        )
    return name


def resolve_kubelet_dir(kubelet_dir: str | Path | None) -> Path:
    """The argument, else ``$KUBEDEVICE_KUBELET_DIR``, else /var/lib/kubelet; made absolute."""
    chosen = kubelet_dir or os.environ.get(KUBELET_DIR_ENV) or DEFAULT_KUBELET_DIR
    return Path(chosen).absolute()


def cdi_spec_dir(setting: str | Path | None, kubelet_dir: Path, *, cluster: bool) -> Path:
    """Where a plugin served with the kubelet folder `kubelet_dir` writes its CDI spec files.

    `setting` (the plugin's `cdi_spec_dir`) when given. Else /var/run/cdi, where the container runtimes
    read generated specs, for a plugin beside a real kubelet: in cluster mode (`cluster`), or with the
    kubelet's own /var/lib/kubelet. Else `<kubelet_dir>/cdi`: a plugin tried beside
    `kubedevice node --root-dir DIR` touches nothing outside DIR.
    """
    if setting is not None and str(setting):
        return Path(setting).absolute()
    if cluster or kubelet_dir == Path(DEFAULT_KUBELET_DIR):
        return DEFAULT_SPEC_DIR
    return kubelet_dir / "cdi"


def say_cdi_spec_dir(folder: Path, kubelet_dir: Path) -> None:
    """Say once (INFO), when a plugin has started, that its spec files go inside its kubelet folder, where
    no container runtime reads them; nothing when they go elsewhere."""
    if folder.is_relative_to(kubelet_dir):
        log.info(
            "CDI spec files go to %s, inside the kubelet folder %s (not %s); set cdi_spec_dir "
            "(--cdi-spec-dir) to %s for a container runtime to read them",
            folder,
            kubelet_dir,
            DEFAULT_KUBELET_DIR,
            DEFAULT_SPEC_DIR,
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def registration_socket_name(registry_dir: Path, driver: str, rolling_update_uid: str) -> str:
    """``<driver>-reg.sock``, or with a rolling update ``<driver>-<uid>-reg.sock``, shortened by hashing
    the UID (then driver and UID) when the path would not fit in a unix socket address."""
    if not rolling_update_uid:
        return f"{driver}-reg.sock"
    for name in (
        f"{driver}-{rolling_update_uid}-reg.sock",
        f"{driver}-{_b64(hashlib.sha256(rolling_update_uid.encode()).digest()[:8])}-reg.sock",
    ):
        if len(str(registry_dir / name).encode()) <= MAX_SOCKET_PATH:
            return name
    digest = hashlib.sha256(f"{driver}\0{rolling_update_uid}".encode()).digest()[:16]
    return f"dra-{_b64(digest)}-reg.sock"


@dataclass(frozen=True)
class DRAPaths:
    """Every path of one driver instance under one kubelet directory."""

    kubelet_dir: Path
    driver: str
    rolling_update_uid: str = ""
    registration_socket_file: str = ""

    @property
    def registry_dir(self) -> Path:
        return self.kubelet_dir / "plugins_registry"

    @property
    def plugin_dir(self) -> Path:
        return self.kubelet_dir / "plugins" / self.driver

    @property
    def registration_socket(self) -> Path:
        name = self.registration_socket_file or registration_socket_name(
            self.registry_dir, self.driver, self.rolling_update_uid
        )
        return self.registry_dir / name

    @property
    def dra_socket(self) -> Path:
        uid = f"-{self.rolling_update_uid}" if self.rolling_update_uid else ""
        return self.plugin_dir / f"dra{uid}.sock"

    @property
    def state_file(self) -> Path:
        return self.plugin_dir / STATE_FILE_NAME

    @property
    def lock_file(self) -> Path:
        return self.plugin_dir / LOCK_FILE_NAME

    def check(self) -> None:
        """Refuse socket paths the kernel cannot bind, naming them."""
        if self.rolling_update_uid and self.registration_socket_file:
            raise ConfigError(
                "rolling updates and explicit registration socket filename are mutually exclusive"
            )
        for path in (self.registration_socket, self.dra_socket):
            if len(str(path).encode()) > MAX_SOCKET_PATH - 1:
                raise ConfigError(
                    f"socket path {path} is longer than {MAX_SOCKET_PATH - 1} bytes — use a shorter kubelet "
                    "directory"
                )
