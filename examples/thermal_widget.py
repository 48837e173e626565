"""A complete plugin for a made-up device: "thermal widgets", each a directory under a sysfs-like root.

Each widget is a folder holding `temp` (degrees; above 90 the widget is unhealthy) and `numa_node`.
examples/widgets/ is a small tree to try it with (w2 runs hot):

    python examples/thermal_widget.py --root examples/widgets --plugin-dir DIR

On a machine with such hardware the root would be its sysfs class folder (say /sys/class/widget); the plugin
directory defaults to $KUBEDEVICE_PLUGIN_DIR, else the kubelet's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence

from kubedevice.plugin import Allocation, Device, DevicePlugin, DeviceSpec, serve


class ThermalWidgetPlugin(DevicePlugin):
    resource_name = "example.com/thermal-widget"
    poll_interval = 0.1

    def __init__(self, root: str) -> None:
        self.root = root

    async def devices(self) -> Sequence[Device]:
        return await asyncio.to_thread(self._scan)

    def _scan(self) -> list[Device]:
        found = []
        for name in sorted(os.listdir(self.root)):
            with open(os.path.join(self.root, name, "temp")) as f:
                too_hot = int(f.read()) > 90
            with open(os.path.join(self.root, name, "numa_node")) as f:
                node = int(f.read())
            found.append(Device(name, healthy=not too_hot, numa_nodes=(node,)))
        return found

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation(
            envs={"WIDGETS": ",".join(d.id for d in devices)},
            devices=[DeviceSpec(f"/dev/{d.id}", f"/dev/{d.id}", "rw") for d in devices],
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True, help="the folder holding one folder per widget")
    parser.add_argument("--plugin-dir", help="the kubelet's device plugin folder")
    args = parser.parse_args()
    serve(ThermalWidgetPlugin(args.root), args.plugin_dir)
