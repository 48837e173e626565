"""Standalone mode: no API server; the node daemon beside the plugin stands in for it.

Claims come from the daemon's status API (`GET /claims/<namespace>/<name>` on
`<kubelet_dir>/kubedevice.sock`; a device's status goes back with `PUT .../status?driver=`), and the
driver's devices go into the slice file
`<kubelet_dir>/resourceslices/<driver>.yaml`, which the daemon reads whenever it changes. The daemon
deletes that file when it starts and when the driver has been gone for a while; a plugin that is still
running writes it again as soon as it is deleted (the directory watch wakes it; nothing polls on a timer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from kubedevice.plugin.dra.backend import slice_file
from kubedevice.plugin.dra.backend.errors import DRABackendError
from kubedevice.plugin.dra.backend.slices import PoolContent, pool_content, standalone_slices
from kubedevice.plugin.dra.backend_api import (
    ClaimFetchError,
    ClaimStatusError,
    PublishedDevice,
    StatusEntries,
)
from kubedevice.plugin.dra.device_model import CounterSet
from kubedevice.statusapi.client import StatusClient, StatusClientError
from kubedevice.statusapi.contract import CLAIMS, claim_not_found_text
from kubedevice.tasks import cancel_and_wait
from kubedevice.watch import DirectoryWatch

log = logging.getLogger(__name__)


class StandaloneBackend:
    """Claims from the node daemon, slices into a file it reads."""

    def __init__(self, *, kubelet_dir: Path, driver_name: str, node_name: str | None = None) -> None:
        self.kubelet_dir = kubelet_dir
        self.driver_name = driver_name
        #: Known at once when given (argument or $NODE_NAME); else asked of the daemon in start().
        self.node_name = node_name or ""
        #: The node daemon's status API, on its socket in the kubelet folder (the daemon's `--root-dir`).
        self.daemon = StatusClient.under(kubelet_dir)
        self.path = slice_file.slice_file(kubelet_dir, driver_name)
        self.generation = 0
        self._content: PoolContent | None = None
        self._lock = asyncio.Lock()
        self._watch: DirectoryWatch | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if not self.node_name:
            self.node_name = await self._daemon_node_name()
        # The watch needs the folder; the daemon makes it too, but may start after the plugin.
        await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
        name = self.path.name
        self._watch = DirectoryWatch(
            self.path.parent,
            relevant=lambda entry, _mask: entry == name,
            poll_state=self._file_state,
            name=f"{self.driver_name} slice file",
        )
        self._watch.start()
        self._task = asyncio.create_task(self._keep_file(self._watch), name=f"{self.driver_name} slice file")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        watch, self._watch = self._watch, None
        if watch is not None:
            await watch.stop()

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            claim = await self.daemon.get_claim(namespace, name)
        except StatusClientError as err:
            raise ClaimFetchError(str(err)) from None
        if claim is None:
            # The API server's NotFound text, so that the SDK's messages read the same in both modes.
            raise ClaimFetchError(claim_not_found_text(name))
        return claim

    async def update_claim_status(self, namespace: str, name: str, entries: StatusEntries) -> None:
        """PUT this driver's entries to the daemon's status route; the daemon validates them as the API
        server does and keeps other drivers' entries."""
        claim = await self.get_claim(namespace, name)
        try:
            await self.daemon.put_claim_status(
                namespace, name, driver=self.driver_name, devices=entries(claim)
            )
        except StatusClientError as err:
            raise ClaimStatusError(str(err)) from None

    async def list_claims(self) -> list[dict[str, Any]]:
        """The daemon's `/claims` entries that are allocated, in the v1 shape the SDK reads."""
        try:
            view = await self.daemon.get_json(CLAIMS)
        except StatusClientError as err:
            raise ClaimFetchError(str(err)) from None
        return [
            {
                "metadata": {"namespace": c.get("namespace"), "name": c.get("name"), "uid": c.get("uid")},
                "status": {"allocation": c["allocation"], "devices": c.get("statusDevices") or []},
            }
            for c in (view.get("claims") if isinstance(view, dict) else None) or []
            if isinstance(c, dict) and c.get("allocation")
        ]

    async def published_taint_times(self) -> dict[tuple[str, str, str, str], datetime]:
        """The taints' times in the slice file a previous run of this driver left (none after the daemon
        restarted: it clears the folder)."""
        return await asyncio.to_thread(slice_file.read_taint_times, self.path)

    async def publish(
        self, devices: Sequence[PublishedDevice], counter_sets: Sequence[CounterSet] = ()
    ) -> None:
        """Write the slice file for these devices and counter sets; the generation goes up when the content
        changes (and past the file's, which a restarted plugin or another instance may have written).

        Raises SliceContentError (a ValueError) for devices that cannot be published; nothing is written then.
        """
        if self._watch is None:
            raise RuntimeError("publish() before start()")
        content = pool_content(devices, counter_sets)
        async with self._lock:
            # During a rolling update two instances of the driver write this file: the generation on disk
            # may be the other's, and the pool's generation must never go down.
            on_disk = await asyncio.to_thread(slice_file.read_generation, self.path)
            if content != self._content or on_disk > self.generation:
                self.generation = max(self.generation, on_disk) + 1
                self._content = content
            await self._write(content)

    async def _write(self, content: PoolContent) -> None:
        documents = standalone_slices(
            driver=self.driver_name, node_name=self.node_name, generation=self.generation, content=content
        )
        text = slice_file.render(self.driver_name, documents)
        await asyncio.to_thread(slice_file.write, self.path, text)
        log.info(
            "published %d device(s) of %s in %s (pool %s, generation %d)",
            content.device_count,
            self.driver_name,
            self.path,
            self.node_name,
            self.generation,
        )

    async def _keep_file(self, watch: DirectoryWatch) -> None:
        """Write the file again whenever it is gone while there is something to publish."""
        while True:
            await watch.changed.wait()
            watch.changed.clear()
            async with self._lock:
                if self._content is None or await asyncio.to_thread(self.path.exists):
                    continue
                # Routine: a node daemon removes every slice file when it starts, and plugins publish again.
                log.info(
                    "%s was removed (a node daemon starting clears the folder): writing it again", self.path
                )
                try:
                    await self._write(self._content)
                except OSError as err:
                    # The next change of the folder (or poll) tries again.
                    log.error("cannot write %s: %s", self.path, err.strerror or err)

    def _file_state(self) -> tuple[bool, bool]:
        return self.path.parent.is_dir(), self.path.exists()

    async def _daemon_node_name(self) -> str:
        try:
            name = await self.daemon.get_node_name()
        except StatusClientError as err:
            raise DRABackendError(
                f"no node name: {err} — start `kubedevice node --root-dir {self.kubelet_dir}` first, "
                "or set NODE_NAME"
            ) from None
        if name is None:
            raise DRABackendError(
                f"no node name: the node daemon at {self.daemon.socket} does not report one "
                "(an older kubedevice node?) — set NODE_NAME"
            )
        return name
