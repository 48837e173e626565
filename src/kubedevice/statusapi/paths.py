"""Every path of the node daemon, all under one root folder: what the daemon and its clients share.

Kept apart from the daemon's configuration so that a client (`status`, `pods`, `top`) finds the status
socket without importing the checkpoint or topology packages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubedevice.api.constants import CHECKPOINT_NAME, KUBELET_SOCKET_NAME
from kubedevice.statusapi.contract import SOCKET_NAME

#: The longest unix socket path Linux accepts (sun_path is 108 bytes with the terminating NUL).
_MAX_SOCKET_PATH = 107


@dataclass(frozen=True, slots=True)
class NodePaths:
    """Every path of the daemon, all under one root ."""

    root: Path
    manifests: Path

    @property
    def plugin_dir(self) -> Path:
        return self.root / "device-plugins"

    @property
    def kubelet_socket(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET_NAME

    @property
    def checkpoint(self) -> Path:
        return self.plugin_dir / CHECKPOINT_NAME

    @property
    def plugins_registry(self) -> Path:
        return self.root / "plugins_registry"

    @property
    def pod_resources_socket(self) -> Path:
        return self.root / "pod-resources" / "kubelet.sock"

    @property
    def status_socket(self) -> Path:
        return self.root / SOCKET_NAME

    @property
    def state_file(self) -> Path:
        return self.root / "pod_state.json"

    @property
    def resourceslices(self) -> Path:
        """Where DRA plugins publish their devices as ResourceSlice documents, one file per driver."""
        return self.root / "resourceslices"

    def socket_path_problem(self) -> str | None:
        """Why a socket of the daemon could not be served under this root (too long a path), or None.

        Checked before anything is created, so a refused start leaves no folder behind.
        """
        for socket_path in (self.kubelet_socket, self.pod_resources_socket, self.status_socket):
            size = len(str(socket_path).encode())
            if size > _MAX_SOCKET_PATH:
                return (
                    f"root {self.root} is too long: {socket_path} is {size} bytes, over the "
                    f"{_MAX_SOCKET_PATH}-byte unix socket path limit — give a root of at most "
                    f"{len(str(self.root).encode()) - (size - _MAX_SOCKET_PATH)} bytes"
                )
        return None

    @classmethod
    def under(cls, root: Path, manifests: Path | None = None) -> NodePaths:
        root = root.absolute()
        return cls(root=root, manifests=(manifests or root / "manifests").absolute())
