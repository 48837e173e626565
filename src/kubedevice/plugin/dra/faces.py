"""One device source, two faces: which device goes to the device plugin API and which to DRA.

The plugin's source is followed once (`source`); each change is split into the devices of each face,
kept in an `Inventory` per face. Under ``api="both"`` a device goes to the face its `Device.api` names
and never to both: the device plugin API says nothing when an allocation ends, so a device offered on
both could be handed out twice. A device without `Device.api` is left out of both faces.

A device whose `Device.api` changes while the plugin runs moves only once nothing holds it on its old
face (`held` says which of some devices are held there; an answer it cannot give counts as held). Until
then it stays, with one WARNING; the move is tried again at every device change and every
`move_retry_s` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Literal

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi.spec import CDISpec
from kubedevice.plugin.inventory import Inventory
from kubedevice.plugin.model import Allocation, Device, Face, PluginOptions

log = logging.getLogger(__name__)

Api = Literal["device-plugin", "dra", "both"]
APIS: tuple[Api, ...] = ("device-plugin", "dra", "both")
#: Which of these device IDs something holds on this face.
HeldCheck = Callable[[Face, frozenset[str]], Awaitable[frozenset[str]]]
#: How often a device that waits to change faces is looked at again, at the latest.
MOVE_RETRY_S = 10.0


class FaceSplit:
    """The plugin's devices, split by face; `run()` follows the source until cancelled."""

    def __init__(
        self,
        plugin: DevicePlugin,
        api: Api,
        held: HeldCheck | None = None,
        move_retry_s: float = MOVE_RETRY_S,
    ) -> None:
        self.plugin = plugin
        self.api = api
        self.source = Inventory(on_change=self._split)
        self.faces: dict[Face, Inventory] = {"device-plugin": Inventory(), "dra": Inventory()}
        self.held = held
        self._move_retry_s = move_retry_s
        #: The face each device is on now, and the face it wants while it waits to move.
        self._assigned: dict[str, Face] = {}
        self._waiting: dict[str, Face] = {}
        self._look_again = asyncio.Event()
        self._warned: set[tuple[str, str]] = set()

    async def run(self) -> None:
        follow = asyncio.ensure_future(self.source.follow(self.plugin, self.plugin.poll_interval))
        moves = asyncio.ensure_future(self._move_when_free())
        try:
            await self.source.ready.wait()
            # The first list may equal the empty start, which is no change: split it anyway, so the
            # faces know their (maybe empty) first list too.
            self._split(self.source.devices)
            await follow
        finally:
            follow.cancel()
            moves.cancel()

    def face_of(self, device: Device) -> Face | None:
        if self.api != "both":
            return self.api
        wanted = device.api
        if wanted is None:
            self._warn_once(
                device.id,
                "",
                'device %s: api="both" needs Device.api ("device-plugin" or "dra"); '
                "it is left out of both faces",
                device.id,
            )
            return None
        current = self._assigned.setdefault(device.id, wanted)
        if current == wanted:
            self._waiting.pop(device.id, None)
            return current
        self._waiting[device.id] = wanted
        self._warn_once(
            device.id,
            wanted,
            "device %s: stays on the %s face until nothing holds it there (wanted: %s)",
            device.id,
            current,
            wanted,
        )
        return current

    def _warn_once(self, device: str, wanted: str, message: str, *args: object) -> None:
        if (device, wanted) not in self._warned:
            self._warned.add((device, wanted))
            log.warning(message, *args)

    def _split(self, devices: tuple[Device, ...]) -> None:
        split: dict[Face, list[Device]] = {"device-plugin": [], "dra": []}
        for device in devices:
            face = self.face_of(device)
            if face is not None:
                split[face].append(device)
        for face, inventory in self.faces.items():
            inventory.update(split[face])
        if self._waiting:
            self._look_again.set()

    async def _move_when_free(self) -> None:
        while True:
            timeout = self._move_retry_s if self._waiting else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._look_again.wait()
            self._look_again.clear()
            if self._waiting and await self._move_free_devices():
                self._split(self.source.devices)

    async def _move_free_devices(self) -> bool:
        """Move every waiting device nothing holds on its face; whether any moved."""
        by_face: dict[Face, set[str]] = {}
        for device_id in self._waiting:
            by_face.setdefault(self._assigned[device_id], set()).add(device_id)
        moved = False
        for face, ids in by_face.items():
            held = frozenset(ids) if self.held is None else await self.held(face, frozenset(ids))
            for device_id in sorted(ids - held):
                wanted = self._waiting.pop(device_id, None)
                if wanted is None:
                    continue
                self._assigned[device_id] = wanted
                self._warned.discard((device_id, wanted))
                log.info("device %s moves from the %s face to the %s face", device_id, face, wanted)
                moved = True
        return moved


class FacePlugin(DevicePlugin):
    """The plugin as one face sees it: its devices come from that face's inventory, the rest delegates."""

    def __init__(self, plugin: DevicePlugin, inventory: Inventory) -> None:
        self._plugin = plugin
        self._inventory = inventory
        self.resource_name = plugin.resource_name
        self.driver_name = plugin.driver_name
        self.poll_interval = plugin.poll_interval
        self.cdi_spec_dir = plugin.cdi_spec_dir

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        await self._inventory.ready.wait()
        version, devices = self._inventory.version, self._inventory.devices
        while True:
            yield devices
            version, devices = await self._inventory.wait_newer(version)

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return await self._plugin.allocate(devices)

    async def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        return await self._plugin.preferred_allocation(available, must_include, size)

    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        await self._plugin.pre_start_container(devices)

    def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
        return self._plugin.cdi_spec(devices)

    def options(self) -> PluginOptions:
        return self._plugin.options()

    def describe_source(self) -> str:
        return "watch"
