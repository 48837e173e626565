"""Broken NUMA reporting: a node the machine lacks (7), a device without topology beside ones with it, and
a preferred allocation that takes the first IDs although two devices share node 0."""

import grpc.aio
from _baseline import Plugin, main

from kubedevice.api.constants import HEALTHY
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp

NODES = {"dev-0": 0, "dev-1": 1, "dev-2": 0, "dev-3": 7}


class BadNuma(Plugin):
    options = dp.DevicePluginOptions(get_preferred_allocation_available=True)

    def devices(self) -> list[dp.Device]:
        on_nodes = [
            dp.Device(ID=d, health=HEALTHY, topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=n)]))
            for d, n in NODES.items()
        ]
        return [*on_nodes, dp.Device(ID="dev-4", health=HEALTHY)]

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.aio.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        # Valid picks (must_include first, then in list order), blind to NUMA nodes.
        return await super().GetPreferredAllocation(request, context)


if __name__ == "__main__":
    main(BadNuma)
