"""Broken: takes 1.5 s before its first device list, so capacity reads 0 for that long after registering."""

import asyncio
from collections.abc import AsyncIterator

import grpc.aio
from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp

DELAY_S = 1.5


class SlowFirstList(Plugin):
    async def ListAndWatch(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[dp.ListAndWatchResponse]:
        await asyncio.sleep(DELAY_S)
        yield dp.ListAndWatchResponse(devices=self.devices())
        await self.stopping.wait()


if __name__ == "__main__":
    main(SlowFirstList)
