"""Each service of the wire API served by grpc.aio on a real unix socket and called with the generated stubs.

Every message type crosses the wire with every field set, so a broken generation or a field that does not
survive encoding shows up here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc

OPTIONS = dp.DevicePluginOptions(pre_start_required=True, get_preferred_allocation_available=True)
DEVICES = dp.ListAndWatchResponse(
    devices=[
        dp.Device(ID="dev-0", health="Healthy", topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=0)])),
        dp.Device(ID="dev-1", health="Unhealthy", topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=1)])),
    ]
)
ALLOCATION = dp.ContainerAllocateResponse(
    envs={"FAKE_DEVICES": "dev-0"},
    mounts=[dp.Mount(container_path="/data", host_path="/srv/data", read_only=True)],
    devices=[dp.DeviceSpec(container_path="/dev/fake0", host_path="/dev/fake0", permissions="rwm")],
    annotations={"example.com/a": "b"},
    cdi_devices=[dp.CDIDevice(name="example.com/fake=dev-0")],
)
REGISTER = dp.RegisterRequest(
    version="v1beta1", endpoint="fake.sock", resource_name="example.com/fake", options=OPTIONS
)
TOPOLOGY = pr.TopologyInfo(nodes=[pr.NUMANode(ID=1)])
MEMORY = pr.ContainerMemory(memory_type="memory", size=2**40, topology=TOPOLOGY)
CONTAINER_DEVICES = pr.ContainerDevices(
    resource_name="example.com/fake", device_ids=["dev-0"], topology=TOPOLOGY
)
POD = pr.PodResources(
    name="pod",
    namespace="ns",
    containers=[
        pr.ContainerResources(
            name="c",
            devices=[CONTAINER_DEVICES],
            cpu_ids=[2, 3],
            memory=[MEMORY],
            dynamic_resources=[
                pr.DynamicResource(
                    claim_name="claim",
                    claim_namespace="ns",
                    claim_resources=[
                        pr.ClaimResource(
                            cdi_devices=[pr.CDIDevice(name="example.com/gpu=0")],
                            driver_name="gpu.example.com",
                            pool_name="pool",
                            device_name="gpu-0",
                            share_id="share",
                        )
                    ],
                )
            ],
        )
    ],
    cpu_ids=[4],
    memory=[MEMORY],
)


class Kubelet(dp_grpc.RegistrationServicer):
    def __init__(self) -> None:
        self.requests: list[dp.RegisterRequest] = []

    async def Register(self, request: dp.RegisterRequest, context: grpc.aio.ServicerContext) -> dp.Empty:  # type: ignore[override]
        self.requests.append(request)
        return dp.Empty()


class Plugin(dp_grpc.DevicePluginServicer):
    async def GetDevicePluginOptions(self, request: dp.Empty, context: object) -> dp.DevicePluginOptions:  # type: ignore[override]
        return OPTIONS

    async def ListAndWatch(
        self, request: dp.Empty, context: object
    ) -> AsyncIterator[dp.ListAndWatchResponse]:  # type: ignore[override]
        yield DEVICES
        yield dp.ListAndWatchResponse(devices=[DEVICES.devices[0]])

    async def GetPreferredAllocation(  # type: ignore[override]
        self, request: dp.PreferredAllocationRequest, context: object
    ) -> dp.PreferredAllocationResponse:
        creq = request.container_requests[0]
        chosen = list(creq.must_include_deviceIDs) + [
            d for d in creq.available_deviceIDs if d not in creq.must_include_deviceIDs
        ]
        return dp.PreferredAllocationResponse(
            container_responses=[
                dp.ContainerPreferredAllocationResponse(deviceIDs=chosen[: creq.allocation_size])
            ]
        )

    async def Allocate(self, request: dp.AllocateRequest, context: object) -> dp.AllocateResponse:  # type: ignore[override]
        assert list(request.container_requests[0].devices_ids) == ["dev-0"]
        return dp.AllocateResponse(container_responses=[ALLOCATION])

    async def PreStartContainer(  # type: ignore[override]
        self, request: dp.PreStartContainerRequest, context: object
    ) -> dp.PreStartContainerResponse:
        assert list(request.devices_ids) == ["dev-0"]
        return dp.PreStartContainerResponse()


class Watcher(reg_grpc.RegistrationServicer):
    def __init__(self) -> None:
        self.statuses: list[reg.RegistrationStatus] = []

    async def GetInfo(self, request: reg.InfoRequest, context: object) -> reg.PluginInfo:  # type: ignore[override]
        return reg.PluginInfo(
            type="DevicePlugin",
            name="example.com/fake",
            endpoint="/x/fake.sock",
            supported_versions=["v1beta1"],
        )

    async def NotifyRegistrationStatus(  # type: ignore[override]
        self, request: reg.RegistrationStatus, context: object
    ) -> reg.RegistrationStatusResponse:
        self.statuses.append(request)
        return reg.RegistrationStatusResponse()


class Lister(pr_grpc.PodResourcesListerServicer):
    async def List(self, request: pr.ListPodResourcesRequest, context: object) -> pr.ListPodResourcesResponse:  # type: ignore[override]
        return pr.ListPodResourcesResponse(pod_resources=[POD])

    async def GetAllocatableResources(  # type: ignore[override]
        self, request: pr.AllocatableResourcesRequest, context: object
    ) -> pr.AllocatableResourcesResponse:
        return pr.AllocatableResourcesResponse(devices=[CONTAINER_DEVICES], cpu_ids=[0, 1], memory=[MEMORY])

    async def Get(
        self, request: pr.GetPodResourcesRequest, context: grpc.aio.ServicerContext
    ) -> pr.GetPodResourcesResponse:  # type: ignore[override]
        if (request.pod_name, request.pod_namespace) != ("pod", "ns"):
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"pod {request.pod_name} in namespace {request.pod_namespace} not found",
            )
        return pr.GetPodResourcesResponse(pod_resources=POD)


@pytest.fixture
async def server_and_channel(
    tmp_path: Path,
) -> AsyncIterator[tuple[grpc.aio.Server, grpc.aio.Channel, dict[str, object]]]:
    socket = tmp_path / "api.sock"
    server = grpc.aio.server()
    servicers: dict[str, object] = {"kubelet": Kubelet(), "watcher": Watcher()}
    dp_grpc.add_RegistrationServicer_to_server(servicers["kubelet"], server)  # type: ignore[arg-type]
    dp_grpc.add_DevicePluginServicer_to_server(Plugin(), server)
    reg_grpc.add_RegistrationServicer_to_server(servicers["watcher"], server)  # type: ignore[arg-type]
    pr_grpc.add_PodResourcesListerServicer_to_server(Lister(), server)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    channel = grpc.aio.insecure_channel(f"unix://{socket}")
    try:
        yield server, channel, servicers
    finally:
        await channel.close()
        await server.stop(None)


async def test_device_plugin_api_round_trip(
    server_and_channel: tuple[grpc.aio.Server, grpc.aio.Channel, dict[str, object]],
) -> None:
    _, channel, servicers = server_and_channel
    await dp_grpc.RegistrationStub(channel).Register(REGISTER)
    kubelet = servicers["kubelet"]
    assert isinstance(kubelet, Kubelet)
    assert kubelet.requests == [REGISTER]

    plugin = dp_grpc.DevicePluginStub(channel)
    assert await plugin.GetDevicePluginOptions(dp.Empty()) == OPTIONS
    snapshots = [msg async for msg in plugin.ListAndWatch(dp.Empty())]
    assert snapshots == [DEVICES, dp.ListAndWatchResponse(devices=[DEVICES.devices[0]])]
    preferred = await plugin.GetPreferredAllocation(
        dp.PreferredAllocationRequest(
            container_requests=[
                dp.ContainerPreferredAllocationRequest(
                    available_deviceIDs=["a", "b", "c"], must_include_deviceIDs=["c"], allocation_size=2
                )
            ]
        )
    )
    assert list(preferred.container_responses[0].deviceIDs) == ["c", "a"]
    allocated = await plugin.Allocate(
        dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["dev-0"])])
    )
    assert allocated.container_responses[0] == ALLOCATION
    assert dict(allocated.container_responses[0].envs) == {"FAKE_DEVICES": "dev-0"}
    await plugin.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["dev-0"]))


async def test_plugin_registration_api_round_trip(
    server_and_channel: tuple[grpc.aio.Server, grpc.aio.Channel, dict[str, object]],
) -> None:
    _, channel, servicers = server_and_channel
    stub = reg_grpc.RegistrationStub(channel)
    info = await stub.GetInfo(reg.InfoRequest())
    assert (info.type, info.name, info.endpoint, list(info.supported_versions)) == (
        "DevicePlugin",
        "example.com/fake",
        "/x/fake.sock",
        ["v1beta1"],
    )
    status = reg.RegistrationStatus(plugin_registered=False, error="RegisterPlugin error -- nope")
    await stub.NotifyRegistrationStatus(status)
    watcher = servicers["watcher"]
    assert isinstance(watcher, Watcher)
    assert watcher.statuses == [status]


async def test_pod_resources_api_round_trip(
    server_and_channel: tuple[grpc.aio.Server, grpc.aio.Channel, dict[str, object]],
) -> None:
    _, channel, _ = server_and_channel
    stub = pr_grpc.PodResourcesListerStub(channel)
    listed = await stub.List(pr.ListPodResourcesRequest())
    assert list(listed.pod_resources) == [POD]
    assert listed.pod_resources[0].containers[0].dynamic_resources[0].claim_resources[0].HasField("share_id")
    allocatable = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest())
    assert (list(allocatable.devices), list(allocatable.cpu_ids), list(allocatable.memory)) == (
        [CONTAINER_DEVICES],
        [0, 1],
        [MEMORY],
    )
    got = await stub.Get(pr.GetPodResourcesRequest(pod_name="pod", pod_namespace="ns"))
    assert got.pod_resources == POD
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Get(pr.GetPodResourcesRequest(pod_name="nope", pod_namespace="ns"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert err.value.details() == "pod nope in namespace ns not found"
