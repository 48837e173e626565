"""Broken: asks for PreStartContainer but does not implement it, so every container would fail to start."""

import grpc
import grpc.aio
from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class PrestartNotImplemented(Plugin):
    options = dp.DevicePluginOptions(pre_start_required=True)

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: grpc.aio.ServicerContext
    ) -> dp.PreStartContainerResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "PreStartContainer is not implemented")
        raise AssertionError("abort returned")


if __name__ == "__main__":
    main(PrestartNotImplemented)
