"""One plugin class, two faces: api="both" with devices split, a migration from the device plugin API
to DRA with no code change, and the start errors of the DRA face."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.plugin import Device
from kubedevice.plugin.dra.runner import FacesServer
from kubedevice.plugin.errors import ConfigError
from tests.dra_kubelet import MemoryBackend, make_claim, prepare, unprepare
from tests.integration.dra_plugins import Gpus, kubelet_dir, paths_of, running
from tests.waiting import poll_async

__all__ = ["kubelet_dir"]


def device_plugin_sockets(registry: Path) -> list[Path]:
    return [p for p in registry.iterdir() if p.name.startswith("example.com_gpu")]


async def list_and_watch_ids(registry: Path) -> list[str]:
    """The first ListAndWatch message of the device plugin face (served in plugin-watcher mode)."""
    sockets = device_plugin_sockets(registry)
    async with grpc.aio.insecure_channel(f"unix://{sockets[0]}") as channel:
        stream = dp_grpc.DevicePluginStub(channel).ListAndWatch(dp.Empty())
        first = await stream.read()
        stream.cancel()
    assert isinstance(first, dp.ListAndWatchResponse)
    return sorted(d.ID for d in first.devices)


def device_plugin_socket_served(registry: Path) -> bool:
    return bool(device_plugin_sockets(registry))


class Lister(pr_grpc.PodResourcesListerServicer):
    """A kubelet's PodResources: `held` are the example.com/gpu devices some container holds."""

    def __init__(self) -> None:
        self.held: list[str] = []
        self.calls = 0

    async def List(self, request: object, context: object) -> pr.ListPodResourcesResponse:
        self.calls += 1
        devices = [pr.ContainerDevices(resource_name="example.com/gpu", device_ids=self.held)]
        container = pr.ContainerResources(name="main", devices=devices)
        return pr.ListPodResourcesResponse(
            pod_resources=[pr.PodResources(name="p", namespace="default", containers=[container])]
        )

    async def GetAllocatableResources(
        self, request: object, context: object
    ) -> pr.AllocatableResourcesResponse:
        return pr.AllocatableResourcesResponse()


@contextlib.asynccontextmanager
async def pod_resources(kubelet_dir: Path, lister: Lister) -> AsyncIterator[None]:
    server = grpc.aio.server()
    pr_grpc.add_PodResourcesListerServicer_to_server(lister, server)
    (kubelet_dir / "pod-resources").mkdir(exist_ok=True)
    server.add_insecure_port(f"unix://{kubelet_dir / 'pod-resources' / 'kubelet.sock'}")
    await server.start()
    try:
        yield
    finally:
        await server.stop(None)


async def test_both_faces_serve_disjoint_devices(kubelet_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    plugin = Gpus(
        [
            Device("gpu-0", api="device-plugin"),
            Device("gpu-1", api="dra"),
            Device("gpu-2", api="dra"),
            Device("gpu-3"),
        ]
    )
    backend = MemoryBackend()
    backend.add(make_claim("c1", "u1", [("gpu", "gpu-1")]))
    registry = kubelet_dir / "plugins_registry"
    watcher_mode = {"plugin_watcher": True, "registry_dir": str(registry)}
    async with running(plugin, kubelet_dir, backend, api="both", **watcher_mode):
        await poll_async(lambda: device_plugin_socket_served(registry), "device plugin socket")
        assert await list_and_watch_ids(registry) == ["gpu-0"]
        await poll_async(lambda: backend.published_ids() == ["gpu-1", "gpu-2"], "DRA devices published")
        answer = await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")])
        assert answer["u1"]["devices"][0]["device_name"] == "gpu-1"
        assert plugin.allocations == [["gpu-1"]]
    warnings = [r.getMessage() for r in caplog.records if "gpu-3" in r.getMessage()]
    assert warnings == [
        'device gpu-3: api="both" needs Device.api ("device-plugin" or "dra"); it is left out of both faces'
    ]


async def test_a_device_changes_faces_once_nothing_holds_it(
    kubelet_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    plugin = Gpus([Device("gpu-0", api="device-plugin"), Device("gpu-1", api="dra")])
    backend = MemoryBackend()
    backend.add(make_claim("c1", "u1", [("gpu", "gpu-1")]))
    registry = kubelet_dir / "plugins_registry"
    lister = Lister()
    lister.held = ["gpu-0"]
    watcher_mode = {"plugin_watcher": True, "registry_dir": str(registry)}
    async with running(plugin, kubelet_dir, backend, api="both", face_move_retry_s=0.05, **watcher_mode):
        await poll_async(lambda: device_plugin_socket_served(registry), "device plugin socket")
        await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")])
        plugin.set_devices([Device("gpu-0", api="dra"), Device("gpu-1", api="device-plugin")])
        stays = "device gpu-0: stays on the device-plugin face until nothing holds it there (wanted: dra)"
        await poll_async(lambda: stays in caplog.text, "the stay warning")
        # No PodResources socket: unknown counts as held. Then a container holds it. Then none does.
        await poll_async(lambda: "cannot tell which devices containers hold" in caplog.text, "a first look")
        async with pod_resources(kubelet_dir, lister):
            await poll_async(lambda: lister.calls >= 2, "two looks at PodResources")
            assert backend.published_ids() == ["gpu-1"]
            assert "gpu-0 moves" not in caplog.text
            lister.held = []
            await poll_async(lambda: backend.published_ids() == ["gpu-0", "gpu-1"], "gpu-0 on DRA")
            assert await list_and_watch_ids(registry) == []
            # gpu-1 is held by the prepared claim and named by c1's allocation: it stays on DRA.
            assert "device gpu-1: stays on the dra face until nothing holds it there" in caplog.text
            await unprepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")])
            assert backend.published_ids() == ["gpu-0", "gpu-1"]
            del backend.claims[("default", "c1")]  # the claim is deallocated and gone
            await poll_async(lambda: backend.published_ids() == ["gpu-0"], "gpu-1 off DRA")
            assert await list_and_watch_ids(registry) == ["gpu-1"]
    assert "device gpu-0 moves from the device-plugin face to the dra face" in caplog.text


async def test_same_class_migrates_from_device_plugin_to_dra(kubelet_dir: Path) -> None:
    registry = kubelet_dir / "plugins_registry"
    async with running(
        Gpus(),
        kubelet_dir,
        MemoryBackend(),
        api="device-plugin",
        plugin_watcher=True,
        registry_dir=str(registry),
    ) as server:
        assert server.dra is None
        await poll_async(lambda: device_plugin_socket_served(registry), "device plugin socket")
        assert await list_and_watch_ids(registry) == ["gpu-0", "gpu-1"]
    backend = MemoryBackend()
    backend.add(make_claim("c1", "u1", [("gpu", "gpu-0"), ("gpu", "gpu-1")]))
    plugin = Gpus()
    async with running(plugin, kubelet_dir, backend, api="dra"):
        assert not device_plugin_socket_served(registry)
        await poll_async(lambda: backend.published_ids() == ["gpu-0", "gpu-1"], "published")
        answer = await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")])
        assert [d["cdi_device_ids"] for d in answer["u1"]["devices"]] == [
            ["gpu.example.com/gpu=gpu-0", "gpu.example.com/gpu=gpu-1", "gpu.example.com/claim=u1-gpu"],
            [],
        ]
        assert plugin.allocations == [["gpu-0", "gpu-1"]]


class Nameless(Gpus):
    resource_name = ""
    driver_name = ""


class BadDriver(Gpus):
    driver_name = "GPU_example"


class LongDriver(Gpus):
    driver_name = "a" * 30 + "." + "b" * 30 + ".com"


@pytest.mark.parametrize(
    ("plugin", "api", "options", "text"),
    [
        (Nameless(), "dra", {}, "the plugin sets neither resource_name nor driver_name — set resource_name"),
        (BadDriver(), "dra", {}, "driver name 'GPU_example' is not a DNS subdomain"),
        (LongDriver(), "dra", {}, "has 65 characters, more than 63"),
        (
            Gpus(),
            "dra",
            {"rolling_update_uid": "A", "registration_socket_file": "x-reg.sock"},
            "rolling updates and explicit registration socket filename are mutually exclusive",
        ),
        (
            Gpus(),
            "dra",
            {"dra_options": {"serve_v1": False, "serve_v1beta1": False}},
            "no supported DRA gRPC API is implemented and enabled",
        ),
        (Gpus(), "dynamic", {}, 'api must be "device-plugin", "dra" or "both", got \'dynamic\''),
    ],
)
def test_start_errors(
    kubelet_dir: Path, plugin: Gpus, api: str, options: dict[str, object], text: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        FacesServer(plugin, api, kubelet_dir=kubelet_dir, backend=MemoryBackend(), **options)  # type: ignore[arg-type]
    assert text in str(refused.value)
    assert "\n" not in str(refused.value)


def test_cluster_mode_without_a_node_name_and_long_socket_paths_refuse_the_start(
    kubelet_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(ConfigError, match=r"^cluster mode needs the node.s name — set NODE_NAME"):
        FacesServer(Gpus(), "dra", kubelet_dir=kubelet_dir, kubeconfig=str(kubelet_dir / "kubeconfig"))
    deep = kubelet_dir / ("d" * 90)
    with pytest.raises(ConfigError, match=r"socket path .* is longer than 107 bytes — use a shorter kubelet"):
        FacesServer(Gpus(), "dra", kubelet_dir=deep, backend=MemoryBackend())
