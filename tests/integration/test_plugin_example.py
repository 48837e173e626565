"""examples/thermal_widget.py, run as its own process against the fake kubelet."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from tests.plugin_kubelet import FakeKubelet, plugin_dir

__all__ = ["plugin_dir"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "thermal_widget.py"


def make_widget(root: str, name: str, temp: int, node: int) -> None:
    os.makedirs(os.path.join(root, name), exist_ok=True)
    for file, value in (("temp", temp), ("numa_node", node)):
        tmp = os.path.join(root, name, f".{file}")
        with open(tmp, "w") as handle:
            handle.write(str(value))
        os.replace(tmp, os.path.join(root, name, file))


def test_example_is_short() -> None:
    assert len(EXAMPLE.read_text().splitlines()) < 60


async def test_example_plugin_registers_streams_and_allocates(plugin_dir: str) -> None:
    root = os.path.join(plugin_dir, "widgets")
    make_widget(root, "widget0", 40, 0)
    make_widget(root, "widget1", 95, 1)
    async with FakeKubelet(plugin_dir) as kubelet:
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(EXAMPLE), "--root", root, "--plugin-dir", plugin_dir
        )
        try:
            registration = await kubelet.wait_registrations(1)
            assert registration.request.resource_name == "example.com/thermal-widget"
            await kubelet.wait_health({"widget0": "Healthy", "widget1": "Unhealthy"})
            assert [n.ID for n in registration.lists[-1].devices[1].topology.nodes] == [1]
            make_widget(root, "widget1", 60, 1)
            await kubelet.wait_health({"widget0": "Healthy", "widget1": "Healthy"})
            response = await registration.stub.Allocate(
                dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["widget1"])])
            )
            container = response.container_responses[0]
            assert dict(container.envs) == {"WIDGETS": "widget1"}
            assert [(d.host_path, d.permissions) for d in container.devices] == [("/dev/widget1", "rw")]
        finally:
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                code = await process.wait()
        assert code == 0
        assert [name for name in os.listdir(plugin_dir) if name.startswith("example.com")] == []
