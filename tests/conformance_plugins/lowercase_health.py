"""Broken: reports health "healthy"; only the exact string "Healthy" counts, so nothing is allocatable."""

from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class LowercaseHealth(Plugin):
    def devices(self) -> list[dp.Device]:
        return [dp.Device(ID=f"dev-{index}", health="healthy") for index in range(4)]


if __name__ == "__main__":
    main(LowercaseHealth)
