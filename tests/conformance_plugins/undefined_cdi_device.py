"""Risky: Allocate names well-formed CDI devices that no spec in the CDI folders defines (a warning)."""

from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class UndefinedCdiDevice(Plugin):
    def container_response(self, ids: list[str]) -> dp.ContainerAllocateResponse:
        return dp.ContainerAllocateResponse(
            cdi_devices=[dp.CDIDevice(name=f"example.com/conformance={device_id}") for device_id in ids]
        )


if __name__ == "__main__":
    main(UndefinedCdiDevice)
