"""Broken: returns from ListAndWatch after the first list; the kubelet then marks every device unhealthy."""

from collections.abc import AsyncIterator

import grpc.aio
from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class EndsListAndWatch(Plugin):
    async def ListAndWatch(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[dp.ListAndWatchResponse]:
        yield dp.ListAndWatchResponse(devices=self.devices())


if __name__ == "__main__":
    main(EndsListAndWatch)
