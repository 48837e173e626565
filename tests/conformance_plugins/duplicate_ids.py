"""Broken: lists the same device ID twice."""

from _baseline import Plugin, main

from kubedevice.api.constants import HEALTHY
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class DuplicateIds(Plugin):
    def devices(self) -> list[dp.Device]:
        return [dp.Device(ID=device_id, health=HEALTHY) for device_id in ("dev-0", "dev-1", "dev-1", "dev-2")]


if __name__ == "__main__":
    main(DuplicateIds)
