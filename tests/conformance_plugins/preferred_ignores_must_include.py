"""Broken: advertises GetPreferredAllocation but answers the first N available IDs, dropping must_include."""

import grpc.aio
from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class PreferredIgnoresMustInclude(Plugin):
    options = dp.DevicePluginOptions(get_preferred_allocation_available=True)

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.aio.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        return dp.PreferredAllocationResponse(
            container_responses=[
                dp.ContainerPreferredAllocationResponse(
                    deviceIDs=list(container.available_deviceIDs[: container.allocation_size])
                )
                for container in request.container_requests
            ]
        )


if __name__ == "__main__":
    main(PreferredIgnoresMustInclude)
