"""Broken: a relative container path and an "x" permission the cgroup device controller does not know."""

from _baseline import Plugin, main

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp


class BadDeviceSpec(Plugin):
    def container_response(self, ids: list[str]) -> dp.ContainerAllocateResponse:
        return dp.ContainerAllocateResponse(
            devices=[
                dp.DeviceSpec(container_path="dev/conformance0", host_path="/dev/null", permissions="rwx")
            ]
        )


if __name__ == "__main__":
    main(BadDeviceSpec)
