"""Broken: a CDI name without vendor and class, and an env name many shells cannot read (a warning)."""

from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class BadEnvAndCdi(Plugin):
    def container_response(self, ids: list[str]) -> dp.ContainerAllocateResponse:
        return dp.ContainerAllocateResponse(
            envs={"CONFORMANCE-DEVICES": ",".join(ids)},
            cdi_devices=[dp.CDIDevice(name=device_id) for device_id in ids],
        )


if __name__ == "__main__":
    main(BadEnvAndCdi)
