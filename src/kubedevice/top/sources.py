"""Where `top` reads a frame from: the node daemon's status API, or any PodResources v1 socket."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from kubedevice.inventory import PodResourcesError, PodResourcesReader
from kubedevice.statusapi import contract
from kubedevice.statusapi.client import StatusClient, StatusClientError
from kubedevice.top.model import TopView, from_podresources, from_status


class TopSourceError(Exception):
    """The source could not be read; str() is one line saying what to do."""


class Source(Protocol):
    async def fetch(self) -> TopView: ...


class StatusSource:
    """`--root-dir DIR`: /node and /pods over DIR/kubedevice.sock give health, topology and holders."""

    def __init__(self, root_dir: Path) -> None:
        self.root_dir = root_dir
        self._daemon = StatusClient.under(root_dir)

    async def _get(self, path: str) -> Any:
        try:
            return await self._daemon.get_json(path)
        except StatusClientError as err:
            raise TopSourceError(str(err)) from None

    async def fetch(self) -> TopView:
        node = await self._get(contract.NODE)
        pods = await self._get(contract.PODS)
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
