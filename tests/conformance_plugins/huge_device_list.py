"""Broken: a device list above gRPC's 4 MiB default, with IDs above the API's 63 characters.

A real kubelet refuses such a ListAndWatch message, so the resource never gets capacity.
"""

from _baseline import Plugin, main

from kubedevice.api.constants import HEALTHY, UNHEALTHY
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp

DEVICES = 60_000


class HugeDeviceList(Plugin):
    def devices(self) -> list[dp.Device]:
        return [
            dp.Device(ID=f"device-{index:0>70}", health=HEALTHY if index < 2 else UNHEALTHY)
            for index in range(DEVICES)
        ]


if __name__ == "__main__":
    main(HugeDeviceList)
