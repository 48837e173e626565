"""Device health streamed by DRA plugins (NodeWatchResources): complete lists stamped with our clock,
timeouts to Unknown, long messages cut, the stream's end dropping the driver's health, and its reopening."""

from __future__ import annotations

import pytest

from kubedevice.dra.health import DeviceHealthInfo
from tests.dra_node import dra_node
from tests.dra_plugin import DRATestPlugin, HealthReport
from tests.waiting import poll_async

DRIVER = "gpu.example.com"


class Clock:
    """The store's clock, moved by the test (staleness is judged on it, not on the plugin's stamps)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("service", ["v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"])
async def test_health_reports_time_out_to_unknown_and_a_stream_end_drops_them(service: str) -> None:
    clock = Clock()
    async with (
        dra_node(clock=clock, health_retry=0.1) as node,
        DRATestPlugin(node.registry, node.sockets, driver=DRIVER, health_service=service) as p,
    ):
        assert (await p.wait_for_status()).plugin_registered
        assert node.plugins.drivers()[0].endpoints[0].health_service == service
        await poll_async(lambda: p.health_streams == 1, "the health stream opened")
        await p.push_health(
            HealthReport("node-1", "gpu-0", "Healthy"),
            HealthReport("node-1", "gpu-1", "Unhealthy", message="ECC errors", timeout_seconds=5),
            HealthReport("node-1", "gpu-2", "Healthy", message="x" * 2000, timeout_seconds=-3),
        )
        health = await poll_async(lambda: node.plugins.device_health(DRIVER), "the first report")
        assert health == {
            ("node-1", "gpu-0"): DeviceHealthInfo("Healthy", "", 1000.0),
            ("node-1", "gpu-1"): DeviceHealthInfo("Unhealthy", "ECC errors", 1000.0),
            ("node-1", "gpu-2"): DeviceHealthInfo("Healthy", "x" * 1021 + "...", 1000.0),
        }
        # gpu-1's own timeout (5 s) passes; the others have the default 30 s (a negative one is unset).
        clock.now = 1006.0
        assert {k: h.health for k, h in node.plugins.device_health(DRIVER).items()} == {
            ("node-1", "gpu-0"): "Healthy",
            ("node-1", "gpu-1"): "Unknown",
            ("node-1", "gpu-2"): "Healthy",
        }
        assert node.plugins.device_health(DRIVER)[("node-1", "gpu-1")] == DeviceHealthInfo(
            "Unknown", "", 1000.0
        )
        # A new complete list without gpu-0: it keeps its last report until that times out.
        await p.push_health(HealthReport("node-1", "gpu-1", "Healthy"))
        await poll_async(
            lambda: node.plugins.device_health(DRIVER)[("node-1", "gpu-1")].health == "Healthy",
            "second report",
        )
        clock.now = 1031.0
        assert {k: h.health for k, h in node.plugins.device_health(DRIVER).items()} == {
            ("node-1", "gpu-0"): "Unknown",
            ("node-1", "gpu-1"): "Healthy",
            ("node-1", "gpu-2"): "Unknown",
        }
        # The stream ends: everything the driver said is dropped, and the stream is opened again.
        await p.end_health_streams()
        await poll_async(lambda: node.plugins.device_health(DRIVER) == {}, "health dropped")
        await poll_async(lambda: p.health_streams == 1, "the stream reopened")
        await p.push_health(HealthReport("node-1", "gpu-0", "Unhealthy"))
        await poll_async(lambda: node.plugins.device_health(DRIVER), "a report on the new stream")
        assert node.plugins.device_health(DRIVER) == {
            ("node-1", "gpu-0"): DeviceHealthInfo("Unhealthy", "", 1031.0)
        }
        # Deregistered: its stream is cancelled, and what it said is dropped as well.
        await p.stop_registration()
        await poll_async(lambda: node.plugins.drivers()[0].endpoints == (), "deregistered")
        await poll_async(lambda: node.plugins.device_health(DRIVER) == {}, "health dropped at deregistration")


async def test_no_stream_without_an_advertised_health_service() -> None:
    async with (
        dra_node(health_retry=0.1) as node,
        DRATestPlugin(
            node.registry,
            node.sockets,
            driver=DRIVER,
            health_service="v1.DRAResourceHealth",
            supported_versions=["v1.DRAPlugin"],
        ) as p,
    ):
        assert (await p.wait_for_status()).plugin_registered
        await poll_async(lambda: node.plugins.get(DRIVER).connected, "connected")
        assert node.plugins.drivers()[0].endpoints[0].health_service is None
        await node.plugins.get(DRIVER).node_prepare_resources([])  # the channel has served a call
        assert p.health_streams == 0
