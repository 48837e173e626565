"""`SpecFile`: the CDI spec a running plugin owns, kept on disk for exactly as long as the plugin runs.

The server asks the plugin's `cdi_spec(devices)` for the spec whenever the device list changes and writes
it when it differs from the one on disk (a health flip changes nothing there). The first spec is on disk
before the plugin registers, so no Allocate answer can name a device no spec defines yet; it is removed
when the server stops, so a runtime never resolves a device of a plugin that is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from kubedevice.cdi_names import CDIError
from kubedevice.plugin.cdi.files import check_spec_dir, remove_spec, write_spec
from kubedevice.plugin.cdi.spec import CDISpec
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.events import EventBus, EventKind
from kubedevice.plugin.model import Device

log = logging.getLogger(__name__)

SpecBuilder = Callable[[Sequence[Device]], CDISpec | None]


class SpecFile:
    """Writes what `build(devices)` returns into `spec_dir` (None: no file), removes it on `close()`."""

    def __init__(self, build: SpecBuilder, spec_dir: Path, events: EventBus) -> None:
        self._build = build
        self.spec_dir = spec_dir
        self._events = events
        self._wanted: CDISpec | None = None
        self._written: CDISpec | None = None
        self._changed = asyncio.Event()
        self._settled = asyncio.Event()
        self._settled.set()
        self._first_failure: ConfigError | None = None
        self._writes = 0

    def devices_changed(self, devices: Sequence[Device]) -> None:
        """Called with every new device list; only a different spec is written (by `run`)."""
        try:
            # A spec must define a device: with none left there is no spec, and the file goes.
            spec = self._build(devices) if devices else None
        except Exception as exc:
            # The author's bug must not stop the device list from reaching the kubelet.
            log.error("cdi_spec() failed, keeping the previous CDI spec: %s", exc)
            return
        if spec != self._wanted:
            self._wanted = spec
            self._settled.clear()
            self._changed.set()

    async def run(self) -> None:
        """Write each wanted spec in turn, off the event loop, until cancelled."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            wanted = self._wanted
            try:
                await asyncio.to_thread(self._sync, wanted)
            except (OSError, ValueError) as exc:
                message = (
                    str(exc)
                    if isinstance(exc, CDIError)
                    else f"cannot write the CDI spec into {self.spec_dir}: {_describe(exc)} — "
                    "give a folder the plugin can write"
                )
                if self._writes == 0:
                    self._first_failure = ConfigError(message)  # said by whoever starts the server
                else:
                    log.error("%s", message)
            else:
                written, self._written = self._written, wanted
                if wanted is not None:
                    path = self.spec_dir / wanted.file_name()
                    devices = str(len(wanted.devices))
                    self._events.emit(EventKind.CDI_SPEC_WRITTEN, path=str(path), devices=devices)
                elif written is not None:
                    self._events.emit(
                        EventKind.CDI_SPEC_REMOVED, path=str(self.spec_dir / written.file_name())
                    )
            self._writes += 1
            if wanted is self._wanted:
                self._settled.set()

    async def settled(self) -> None:
        """Wait until the latest wanted spec is on disk; raise ConfigError if the very first write failed."""
        await self._settled.wait()
        if self._first_failure is not None:
            raise self._first_failure

    async def close(self) -> None:
        """Remove the spec file written last, if any."""
        written, self._written = self._written, None
        if written is None:
            return
        path = self.spec_dir / written.file_name()
        try:
            await asyncio.to_thread(remove_spec, written, self.spec_dir)
        except OSError as exc:
            log.error("cannot remove the CDI spec %s: %s", path, _describe(exc))
            return
        self._events.emit(EventKind.CDI_SPEC_REMOVED, path=str(path))

    def _sync(self, wanted: CDISpec | None) -> None:
        written = self._written
        if wanted is not None:
            check_spec_dir(self.spec_dir)
            write_spec(wanted, self.spec_dir)
        # A new kind means a new file name: the old file would go on defining devices that are gone.
        if written is not None and (wanted is None or written.file_name() != wanted.file_name()):
            remove_spec(written, self.spec_dir)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
