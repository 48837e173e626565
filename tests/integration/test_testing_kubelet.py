"""The pytest kit's `kubelet` fixture (loaded through the `kubedevice` pytest11 entry point) on real sockets.

Against the SDK's example plugin served in this loop and the fake plugin as its own process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import grpc.aio
import pytest

from kubedevice.api.constants import KUBELET_SOCKET_NAME
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.conformance.process import PluginProcess
from kubedevice.plugin import Device, DeviceSpec
from kubedevice.plugin.builtin.fake import FakeConfig, FakePlugin
from kubedevice.testing import PluginCallFailed, StandInKubelet
from tests.plugin_kubelet import exists
from tests.waiting import short_tempdir

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "thermal_widget.py"
CLI = (sys.executable, "-c", "from kubedevice.cli import run; run()")
RAW_PLUGINS = Path(__file__).resolve().parents[1] / "conformance_plugins"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("thermal_widget", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_widget(root: Path, name: str, temp: int, node: int) -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for file, value in (("temp", temp), ("numa_node", node)):
        (folder / f".{file}").write_text(str(value))
        os.replace(folder / f".{file}", folder / file)


@pytest.fixture
def widgets() -> Path:
    root = short_tempdir("kdw-")
    write_widget(root, "w0", 40, 0)
    write_widget(root, "w1", 95, 1)
    return root


@pytest.fixture
async def fake_process(kubelet: StandInKubelet) -> AsyncIterator[PluginProcess]:
    """`kubedevice plugin fake` as its own process against the fixture's plugin folder."""
    args = ("plugin", "fake", "--resource", "example.com/fake", "--devices", "3", "--preferred")
    plugin = PluginProcess(
        (*CLI, *args, "--prestart", "--poll-interval", "0.1"),
        kubelet.plugin_dir,
        kubelet.plugin_dir / "p.log",
    )
    await plugin.start()
    yield plugin
    await plugin.stop(10.0)


async def test_the_example_plugin_lists_its_widgets_and_allocates(
    kubelet: StandInKubelet, widgets: Path
) -> None:
    example = load_example()
    await kubelet.serve_plugin(example.ThermalWidgetPlugin(str(widgets)))

    devices = await kubelet.devices("example.com/thermal-widget")

    assert devices == [Device("w0", True, (0,)), Device("w1", False, (1,))]
    registration = kubelet.registrations[-1]
    assert (registration.accepted, registration.version) == (True, "v1beta1")
    assert registration.endpoint.startswith("example.com_thermal-widget")
    write_widget(widgets, "w1", 60, 1)
    await kubelet.wait_for(lambda: kubelet.health() == {"w0": True, "w1": True})
    allocation = await kubelet.allocate("w1")
    assert dict(allocation.envs) == {"WIDGETS": "w1"}
    assert list(allocation.devices) == [DeviceSpec("/dev/w1", "/dev/w1", "rw")]


async def test_restart_deletes_sockets_and_an_sdk_plugin_registers_again(kubelet: StandInKubelet) -> None:
    server = await kubelet.serve_plugin(FakePlugin(FakeConfig("example.com/fake", 2, poll_interval=0.1)))
    assert [d.id for d in await kubelet.devices()] == ["fake-0", "fake-1"]
    first_socket = server.socket_path
    assert first_socket is not None

    await kubelet.restart()

    registration = await kubelet.wait_registered("example.com/fake")
    assert (registration.generation, kubelet.generation) == (1, 1)
    assert not exists(first_socket)
    assert exists(str(kubelet.socket_path))
    assert server.socket_path != first_socket
    assert [d.id for d in await kubelet.devices()] == ["fake-0", "fake-1"]
    assert dict((await kubelet.allocate("fake-0")).envs) == {"FAKE_DEVICES": "fake-0"}


async def test_the_fake_plugin_process_answers_every_call(
    kubelet: StandInKubelet, fake_process: PluginProcess
) -> None:
    assert [d.id for d in await kubelet.devices("example.com/fake")] == ["fake-0", "fake-1", "fake-2"]
    registration = await kubelet.wait_registered()
    assert registration.options is not None
    assert registration.options.pre_start_required and registration.options.get_preferred_allocation_available

    preferred = await kubelet.preferred(["fake-0", "fake-1", "fake-2"], must_include=["fake-2"], size=2)
    assert len(preferred) == 2 and "fake-2" in preferred
    await kubelet.pre_start("fake-1")
    allocation = await kubelet.allocate("fake-0", "fake-1")
    assert dict(allocation.envs) == {"FAKE_DEVICES": "fake-0,fake-1"}

    with pytest.raises(PluginCallFailed) as refused:
        await kubelet.allocate("no-such-device")
    message = str(refused.value)
    assert message.startswith("Allocate(no-such-device) on example.com/fake failed: rpc error: code = ")
    assert "\n" not in message


async def test_waits_fail_with_one_line_naming_what_was_missing(kubelet: StandInKubelet) -> None:
    with pytest.raises(AssertionError) as nothing:
        await kubelet.devices(timeout=0.2)
    socket = kubelet.plugin_dir / KUBELET_SOCKET_NAME
    assert str(nothing.value) == f"the plugin did not register within 0.2 s (kubelet.sock is {socket})"

    with pytest.raises(AssertionError) as never:
        await kubelet.wait_for(lambda: kubelet.health().get("fake-9"), timeout=0.2, what="fake-9 healthy")
    assert str(never.value) == "fake-9 healthy not met within 0.2 s; no plugin registered"


async def test_a_refused_registration_is_reported_with_the_kubelets_reason(kubelet: StandInKubelet) -> None:
    async with grpc.aio.insecure_channel(f"unix://{kubelet.socket_path}") as channel:
        request = dp.RegisterRequest(version="v1alpha1", endpoint="x.sock", resource_name="example.com/x")
        with pytest.raises(grpc.aio.AioRpcError):
            await dp_grpc.RegistrationStub(channel).Register(request)

    with pytest.raises(AssertionError) as refused:
        await kubelet.wait_registered("example.com/x", timeout=0.2)
    assert str(refused.value).startswith(
        "the registration of 'example.com/x' was refused: requested API version \"v1alpha1\" is not supported"
    )
    assert [r.accepted for r in kubelet.registrations] == [False]


async def test_an_empty_list_is_a_list_and_the_summary_says_so(kubelet: StandInKubelet) -> None:
    class NoBus(FakePlugin):
        async def devices(self) -> list[Device]:
            raise RuntimeError("no widgets bus")

    # The SDK keeps the kubelet informed while the source fails: an empty list, not silence.
    await kubelet.serve_plugin(NoBus(FakeConfig("example.com/broken", 1, poll_interval=0.05)))

    assert await kubelet.devices() == []
    assert kubelet.summary() == "example.com/broken: empty list"
    with pytest.raises(AssertionError) as never:
        await kubelet.wait_for(lambda: kubelet.latest(), timeout=0.2, what="a device")
    assert str(never.value) == "a device not met within 0.2 s; example.com/broken: empty list"


async def run_raw_plugin(kubelet: StandInKubelet, script: str) -> PluginProcess:
    """One of the conformance suite's plugins written straight on grpc.aio, as its own process."""
    command = (sys.executable, str(RAW_PLUGINS / script))
    plugin = PluginProcess(command, kubelet.plugin_dir, kubelet.plugin_dir / "p.log")
    await plugin.start()
    return plugin


async def test_a_plugin_without_the_sdk_that_is_slow_to_list_is_named(kubelet: StandInKubelet) -> None:
    plugin = await run_raw_plugin(kubelet, "slow_first_list.py")
    try:
        await kubelet.wait_registered("example.com/conformance")
        with pytest.raises(AssertionError) as slow:
            await kubelet.devices(timeout=0.2)
        assert str(slow.value) == "example.com/conformance sent no ListAndWatch list within 0.2 s"

        assert await kubelet.devices() == [Device(f"dev-{n}") for n in range(4)]
    finally:
        await plugin.stop(10.0)


async def test_a_stream_the_plugin_ends_is_recorded_with_why(kubelet: StandInKubelet) -> None:
    plugin = await run_raw_plugin(kubelet, "ends_list_and_watch.py")
    try:
        ended = await kubelet.wait_for(
            lambda: kubelet.registrations and kubelet.registrations[-1].stream_ended
        )
        assert ended == "stream closed by the plugin"
        assert kubelet.registrations[-1].lists_received == 1
    finally:
        await plugin.stop(10.0)
