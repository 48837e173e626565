"""A small, correct device plugin written straight on grpc.aio and the generated stubs (not the SDK).

Each script beside this file subclasses `Plugin` and breaks exactly one thing, so the conformance checker
can be shown to catch that thing. Run as `python <script>.py PLUGIN_DIR` (or with $KUBEDEVICE_PLUGIN_DIR).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio

from kubedevice.api.constants import HEALTHY, KUBELET_SOCKET_NAME, VERSION
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

#: How often the plugin looks at kubelet.sock; a real plugin would use inotify.
POLL_S = 0.05

Context = grpc.aio.ServicerContext


class Plugin(dp_grpc.DevicePluginServicer):
    resource = "example.com/conformance"
    version = VERSION
    options = dp.DevicePluginOptions()

    def __init__(self, plugin_dir: Path) -> None:
        self.plugin_dir = plugin_dir
        self.kubelet_socket = plugin_dir / KUBELET_SOCKET_NAME
        self.endpoint = f"conformance-{os.getpid()}.sock"
        self.server: grpc.aio.Server | None = None
        self.stopping = asyncio.Event()

    # -- what the plugin reports ------------------------------------------------------------------

    def devices(self) -> list[dp.Device]:
        return [dp.Device(ID=f"dev-{index}", health=HEALTHY) for index in range(4)]

    def known_ids(self) -> set[str]:
        return {device.ID for device in self.devices()}

    def container_response(self, ids: list[str]) -> dp.ContainerAllocateResponse:
        return dp.ContainerAllocateResponse(
            envs={"CONFORMANCE_DEVICES": ",".join(ids)},
            devices=[dp.DeviceSpec(container_path="/dev/null", host_path="/dev/null", permissions="rw")],
            mounts=[dp.Mount(container_path="/run/conformance", host_path="/tmp", read_only=True)],
        )

    # -- the DevicePlugin service -----------------------------------------------------------------

    async def GetDevicePluginOptions(self, request: dp.Empty, context: Context) -> dp.DevicePluginOptions:
        return self.options

    async def ListAndWatch(
        self, request: dp.Empty, context: Context
    ) -> AsyncIterator[dp.ListAndWatchResponse]:
        yield dp.ListAndWatchResponse(devices=self.devices())
        await self.stopping.wait()

    async def Allocate(self, request: dp.AllocateRequest, context: Context) -> dp.AllocateResponse:
        known = self.known_ids()
        responses = []
        for container in request.container_requests:
            unknown = sorted(set(container.devices_ids) - known)
            if unknown:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown devices {unknown}")
            responses.append(self.container_response(list(container.devices_ids)))
        return dp.AllocateResponse(container_responses=responses)

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: Context
    ) -> dp.PreferredAllocationResponse:
        responses = []
        for container in request.container_requests:
            picked = list(container.must_include_deviceIDs)
            for device_id in container.available_deviceIDs:
                if len(picked) >= container.allocation_size:
                    break
                if device_id not in picked:
                    picked.append(device_id)
            responses.append(dp.ContainerPreferredAllocationResponse(deviceIDs=picked))
        return dp.PreferredAllocationResponse(container_responses=responses)

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: Context
    ) -> dp.PreStartContainerResponse:
        return dp.PreStartContainerResponse()

    # -- lifecycle --------------------------------------------------------------------------------

    async def serve(self) -> None:
        socket_path = self.plugin_dir / self.endpoint
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        server = grpc.aio.server()
        dp_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{socket_path}")
        await server.start()
        self.server = server

    async def stop_serving(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=0)
            self.server = None

    async def register(self) -> None:
        async with grpc.aio.insecure_channel(f"unix://{self.kubelet_socket}") as channel:
            request = dp.RegisterRequest(
                version=self.version,
                endpoint=self.endpoint,
                resource_name=self.resource,
                options=self.options,
            )
            await dp_grpc.RegistrationStub(channel).Register(request, timeout=10, wait_for_ready=True)
        print(f"registered {self.resource} at {self.endpoint}", flush=True)

    async def start(self) -> None:
        await self.serve()
        await self.register()

    async def on_kubelet_restart(self) -> None:
        """kubelet.sock was created again: serve a fresh socket and register again."""
        await self.stop_serving()
        await self.start()

    async def on_kubelet_gone(self, missing_for_s: float) -> None:
        """kubelet.sock is absent; a good plugin just waits for it."""

    async def watch_kubelet(self) -> None:
        loop = asyncio.get_running_loop()
        seen = _identity(self.kubelet_socket)
        missing_since: float | None = None
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=POLL_S)
            current = _identity(self.kubelet_socket)
            if current is None:
                missing_since = missing_since if missing_since is not None else loop.time()
                await self.on_kubelet_gone(loop.time() - missing_since)
                continue
            missing_since = None
            if current != seen:
                seen = current
                try:
                    await self.on_kubelet_restart()
                except grpc.aio.AioRpcError as err:
                    if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                        raise
                    # The kubelet went away again while we registered (it may restart right after it
                    # dialled us back, before its answer reached us): register again at the next look.
                    print(f"Register cut short ({err.code().name}); trying again", flush=True)
                    seen = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopping.set)
        try:
            await self.start()
            await self.watch_kubelet()
        finally:
            await self.stop_serving()


def _identity(path: Path) -> tuple[int, int] | None:
    """Inode and change time: an inode number alone can be reused by a socket created right after."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_ctime_ns


def main(plugin_class: type[Plugin]) -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KUBEDEVICE_PLUGIN_DIR", "")
    if not directory:
        print("usage: <script> PLUGIN_DIR (or set KUBEDEVICE_PLUGIN_DIR)", file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(plugin_class(Path(directory)).run())
    except grpc.aio.AioRpcError as err:
        print(f"plugin failed: {err.code().name}: {err.details()}", file=sys.stderr, flush=True)
        # At once: grpc's threads can hold a normal interpreter shutdown after a failed call.
        os._exit(1)


if __name__ == "__main__":
    main(Plugin)
