"""Where `top` reads a frame from: the node daemon's status API, or any PodResources v1 socket."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from kubedevice.inventory import PodResourcesError, PodResourcesReader
from kubedevice.statusapi.http import StatusClientError, get
from kubedevice.top.model import TopView, from_podresources, from_status

STATUS_SOCKET_NAME = "kubedevice.sock"


class TopSourceError(Exception):
    """The source could not be read; str() is one line saying what to do."""


class Source(Protocol):
    async def fetch(self) -> TopView: ...


class StatusSource:
    """`--root-dir DIR`: /node and /pods over DIR/kubedevice.sock give health, topology and holders."""

    def __init__(self, root_dir: Path) -> None:
        self.root_dir = root_dir
        self._socket = root_dir / STATUS_SOCKET_NAME

    async def _get(self, path: str) -> Any:
        try:
            return json.loads(await get(self._socket, path))
        except StatusClientError as err:
            raise TopSourceError(str(err)) from None
        except ValueError:
            raise TopSourceError(f"{self._socket} answered {path} with something that is not JSON") from None

    async def fetch(self) -> TopView:
        node = await self._get("/node")
        pods = await self._get("/pods")
        source = f"node daemon at {self.root_dir} (health from its status API)"
        return from_status(source, node, pods)


class PodResourcesSource:
    """`--socket PATH`: a kubelet's PodResources, which lists healthy devices only."""

    def __init__(self, socket: str) -> None:
        self._reader = PodResourcesReader(socket)

    async def fetch(self) -> TopView:
        try:
            view = await self._reader.read()
        except PodResourcesError as err:
            raise TopSourceError(str(err)) from None
        return from_podresources(f"PodResources at {self._reader.socket}", view)
