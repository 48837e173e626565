"""A DevicePlugin owning a CDI spec: written before Register, rewritten on device changes, removed on stop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.conformance import Result
from kubedevice.conformance.plugin_call_checks import allocate_check
from kubedevice.plugin import (
    Allocation,
    ConfigError,
    Device,
    DevicePlugin,
    EventKind,
    LifecycleEvent,
    PluginServer,
)
from kubedevice.plugin.cdi import CDIDevice, CDISpec, ContainerEdits, DeviceNode, defined_devices
from tests.plugin_kubelet import FakeKubelet, plugin_dir, wait_until

__all__ = ["plugin_dir"]


class Accelerators(DevicePlugin):
    """The documented pattern: one pure `cdi_spec(devices)`, and `allocate` names devices from it."""

    resource_name = "example.com/accel"

    def __init__(self, spec_dir: Path) -> None:
        self.cdi_spec_dir = spec_dir
        self.lists: asyncio.Queue[list[Device]] = asyncio.Queue()
        self.lists.put_nowait([Device("accel0"), Device("accel1")])
        self.kind = "example.com/accel"

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        while True:
            yield await self.lists.get()

    def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
        nodes = {
            d.id: ContainerEdits(device_nodes=(DeviceNode(f"/dev/{d.id}", permissions="rw"),))
            for d in devices
        }
        return CDISpec(self.kind, tuple(CDIDevice(name, edits) for name, edits in nodes.items()))

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        spec = self.cdi_spec(devices)
        assert spec is not None
        return Allocation(cdi_devices=spec.qualified_names(d.id for d in devices))


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def listing(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def kinds(events: list[LifecycleEvent], kind: EventKind) -> list[LifecycleEvent]:
    return [e for e in events if e.kind == kind]


async def test_the_spec_defines_the_devices_for_as_long_as_the_plugin_runs(
    plugin_dir: str, tmp_path: Path
) -> None:
    spec_dir = tmp_path / "run" / "cdi"  # created on the first write
    plugin = Accelerators(spec_dir)
    events: list[LifecycleEvent] = []
    spec_file = spec_dir / "example.com-accel.json"
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin, plugin_dir, on_event=events.append):
        registration = await kubelet.wait_registrations(1)
        await wait_until(lambda: bool(kinds(events, EventKind.REGISTERED)), what="Register to return")
        order = [e.kind for e in events]
        assert order.index(EventKind.CDI_SPEC_WRITTEN) < order.index(EventKind.REGISTERED)
        written = kinds(events, EventKind.CDI_SPEC_WRITTEN)[0]
        assert written.fields == {"path": str(spec_file), "devices": "2"}
        document = load(spec_file)
        assert document["kind"] == "example.com/accel" and document["cdiVersion"] == "0.3.0"
        assert [d["name"] for d in document["devices"]] == ["accel0", "accel1"]

        response = await registration.stub.Allocate(
            dp.AllocateRequest(
                container_requests=[dp.ContainerAllocateRequest(devices_ids=["accel1", "accel0"])]
            )
        )
        names = [c.name for c in response.container_responses[0].cdi_devices]
        assert names == ["example.com/accel=accel1", "example.com/accel=accel0"]
        assert set(names) <= defined_devices((spec_dir,))

        # A health flip leaves the spec alone; a new device rewrites it.
        plugin.lists.put_nowait([Device("accel0", healthy=False), Device("accel1")])
        await kubelet.wait_health({"accel0": "Unhealthy", "accel1": "Healthy"})
        plugin.lists.put_nowait([Device("accel0"), Device("accel1"), Device("accel2")])
        await wait_until(
            lambda: len(kinds(events, EventKind.CDI_SPEC_WRITTEN)) == 2, what="the spec rewritten"
        )
        assert kinds(events, EventKind.CDI_SPEC_WRITTEN)[1].fields["devices"] == "3"
        assert "example.com/accel=accel2" in defined_devices((spec_dir,))

        # A new kind is a new file: the old one must not go on defining devices.
        plugin.kind = "example.com/accel-v2"
        plugin.lists.put_nowait([Device("accel0")])
        await wait_until(
            lambda: len(kinds(events, EventKind.CDI_SPEC_WRITTEN)) == 3, what="the new kind's spec"
        )
        assert defined_devices((spec_dir,)) == {"example.com/accel-v2=accel0"}

        # No device left: no spec (a spec must define one), and the file goes.
        plugin.lists.put_nowait([])
        await wait_until(lambda: bool(kinds(events, EventKind.CDI_SPEC_REMOVED)), what="the spec removed")
        assert listing(spec_dir) == []
        plugin.lists.put_nowait([Device("accel0")])
        await wait_until(lambda: len(kinds(events, EventKind.CDI_SPEC_WRITTEN)) == 4, what="the spec back")
    assert listing(spec_dir) == []
    removed = [e.fields["path"] for e in kinds(events, EventKind.CDI_SPEC_REMOVED)]
    assert removed == [str(spec_dir / "example.com-accel-v2.json")] * 2


async def test_a_spec_folder_that_cannot_be_written_stops_the_server_before_it_registers(
    plugin_dir: str, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    plugin = Accelerators(tmp_path / "file" / "cdi")
    async with FakeKubelet(plugin_dir) as kubelet:
        with pytest.raises(
            ConfigError, match=r"CDI spec folder .*/file/cdi: .*/file is a file, not a folder"
        ):
            await PluginServer(plugin, plugin_dir).run()
        assert kubelet.registrations == []


async def test_a_failing_cdi_spec_keeps_the_devices_advertised(
    plugin_dir: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Accelerators):
        def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
            raise RuntimeError("no driver loaded")

    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(Broken(tmp_path), plugin_dir):
        await kubelet.wait_registrations(1)
        await kubelet.wait_health({"accel0": "Healthy", "accel1": "Healthy"})
    assert "cdi_spec() failed, keeping the previous CDI spec: no driver loaded" in caplog.text
    assert listing(tmp_path) == []


def test_a_plugin_without_cdi_spec_writes_nothing() -> None:
    assert DevicePlugin().cdi_spec([Device("a")]) is None


async def test_the_allocate_check_finds_the_names_in_the_plugins_spec_and_says_why_not(
    plugin_dir: str, tmp_path: Path
) -> None:
    spec_dir, elsewhere = tmp_path / "cdi", tmp_path / "elsewhere"
    make_folder(elsewhere, {"broken.json": "{"})
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(Accelerators(spec_dir), plugin_dir):
        stub = (await kubelet.wait_registrations(1)).stub
        found = await allocate_check(stub, ["accel0", "accel1"], 5.0, (Path("/nonexistent"), spec_dir))
        assert found.result == Result.PASS
        assert f"2 CDI devices defined by specs in /nonexistent, {spec_dir}" in found.detail
        missing = await allocate_check(stub, ["accel0", "accel1"], 5.0, (elsewhere,))
    assert missing.result == Result.WARN
    assert (
        "CDI device(s) [example.com/accel=accel0, example.com/accel=accel1] named in Allocate answers are "
        f"defined by no spec in {elsewhere}: the runtime fails the container — write a spec defining them "
        f"(or point --cdi-spec-dir at it); skipped as invalid: {elsewhere}/broken.json: not valid JSON"
    ) in missing.detail


def make_folder(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
