"""Risky: allocates device IDs it never listed instead of refusing them (a warning, not a failure)."""

import grpc.aio
from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class AcceptsUnknownIds(Plugin):
    async def Allocate(
        self, request: dp.AllocateRequest, context: grpc.aio.ServicerContext
    ) -> dp.AllocateResponse:
        return dp.AllocateResponse(
            container_responses=[
                self.container_response(list(container.devices_ids))
                for container in request.container_requests
            ]
        )


if __name__ == "__main__":
    main(AcceptsUnknownIds)
