"""One device source, two faces: which device goes to the device plugin API and which to DRA.

The plugin's source is followed once (`source`); each change is split into the devices of each face,
kept in an `Inventory` per face. Under ``api="both"`` a device goes to the face its `Device.api` names
and never to both: the device plugin API says nothing when an allocation ends, so a device offered on
both could be handed out twice. A device without `Device.api` is left out of both faces.

A device whose `Device.api` changes while the plugin runs stays on the face it was first seen on, with
one WARNING: moving it safely needs proof that nothing holds it on its old face.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Literal

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi.spec import CDISpec
from kubedevice.plugin.inventory import Inventory
from kubedevice.plugin.model import Allocation, Device, Face, PluginOptions

log = logging.getLogger(__name__)

Api = Literal["device-plugin", "dra", "both"]
APIS: tuple[Api, ...] = ("device-plugin", "dra", "both")


class FaceSplit:
    """The plugin's devices, split by face; `run()` follows the source until cancelled."""

    def __init__(self, plugin: DevicePlugin, api: Api) -> None:
        self.plugin = plugin
        self.api = api
        self.source = Inventory(on_change=self._split)
        self.faces: dict[Face, Inventory] = {"device-plugin": Inventory(), "dra": Inventory()}
        self._first_face: dict[str, Face] = {}
        self._warned: set[tuple[str, str]] = set()

    async def run(self) -> None:
        follow = asyncio.ensure_future(self.source.follow(self.plugin, self.plugin.poll_interval))
        try:
            await self.source.ready.wait()
            # The first list may equal the empty start, which is no change: split it anyway, so the
            # faces know their (maybe empty) first list too.
            self._split(self.source.devices)
            await follow
        finally:
            follow.cancel()

    def face_of(self, device: Device) -> Face | None:
        if self.api != "both":
            return self.api
        wanted = device.api
        if wanted is None:
            if (device.id, "") not in self._warned:
                self._warned.add((device.id, ""))
                log.warning(
                    'device %s: api="both" needs Device.api ("device-plugin" or "dra"); '
                    "it is left out of both faces",
                    device.id,
                )
            return None
        first = self._first_face.setdefault(device.id, wanted)
        if first != wanted and (device.id, wanted) not in self._warned:
            self._warned.add((device.id, wanted))
            log.warning(
                "device %s: stays on the %s face until nothing holds it there (wanted: %s)",
                device.id,
                first,
                wanted,
            )
        return first

    def _split(self, devices: tuple[Device, ...]) -> None:
        split: dict[Face, list[Device]] = {"device-plugin": [], "dra": []}
        for device in devices:
            face = self.face_of(device)
            if face is not None:
                split[face].append(device)
        for face, inventory in self.faces.items():
            inventory.update(split[face])


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
