"""Broken: answers Allocate with no container response at all."""

import grpc.aio
from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class NoContainerResponses(Plugin):
    async def Allocate(
        self, request: dp.AllocateRequest, context: grpc.aio.ServicerContext
    ) -> dp.AllocateResponse:
        return dp.AllocateResponse()


if __name__ == "__main__":
    main(NoContainerResponses)
