"""DRA plugins registering through plugins_registry: service choice, refusals with the kubelet's texts,
several endpoints per driver, deregistration of one endpoint, and one watcher serving both managers."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

import pytest

from kubedevice.api.constants import DEVICE_PLUGIN_TYPE
from kubedevice.dra.errors import DriverLookupError
from kubedevice.manager import DeviceManager
from kubedevice.plugin import Allocation, Device, DevicePlugin, PluginServer
from tests.dra_node import DRANode, dra_node
from tests.dra_plugin import PREPARE, DRATestPlugin
from tests.waiting import poll_async, short_tempdir

DRIVER = "gpu.example.com"
V1, V1BETA1 = "v1.DRAPlugin", "v1beta1.DRAPlugin"
REFUSED = "RegisterPlugin error -- plugin validation failed with err: "


def plugin(node: DRANode, name: str = "", **kwargs: object) -> DRATestPlugin:
    """A test plugin in `node`'s directories; `name` tells its sockets apart from another's."""
    driver = str(kwargs.pop("driver", DRIVER))
    return DRATestPlugin(
        node.registry,
        node.sockets,
        driver=driver,
        registration_name=f"{driver}{name}-reg.sock",
        endpoint=str(kwargs.pop("endpoint", os.path.join(node.sockets, f"{driver}{name}.sock"))),
        **kwargs,  # type: ignore[arg-type]
    )


async def refusal(p: DRATestPlugin) -> str:
    async with p:
        status = await p.wait_for_status()
    assert not status.plugin_registered
    return status.error


@pytest.mark.parametrize(("versions", "chosen"), [([V1, V1BETA1], V1), ([V1BETA1, V1], V1BETA1)])
async def test_the_service_is_the_first_of_the_plugins_list_that_the_node_calls(
    versions: Sequence[str], chosen: str
) -> None:
    async with dra_node() as node, plugin(node, supported_versions=versions) as p:
        status = await p.wait_for_status()
        assert (status.plugin_registered, status.error) == (True, "")
        client = node.plugins.get(DRIVER)
        assert (client.driver, client.endpoint, client.service) == (DRIVER, p.endpoint, chosen)
        assert node.registered == [DRIVER]
        await client.node_prepare_resources([])
        assert [(c.method, c.service) for c in p.calls] == [(PREPARE, chosen)]


async def test_an_empty_service_list_is_refused_with_the_kubelets_text() -> None:
    async with dra_node() as node:
        p = plugin(node, supported_versions=[])
        assert await refusal(p) == (
            f"{REFUSED}invalid supported gRPC versions of DRA driver plugin {DRIVER} at endpoint "
            f"{p.endpoint}: empty list of supported gRPC services (aka supported versions)"
        )
        with pytest.raises(DriverLookupError, match=f"^DRA driver {DRIVER} is not registered$"):
            node.plugins.get(DRIVER)


@pytest.mark.parametrize(
    ("versions", "quoted"),
    [
        (["1.0.0"], '["1.0.0"]'),
        (["v1alpha3.NodeService", "v1.DRAResourceHealth"], '["v1alpha3.NodeService" "v1.DRAResourceHealth"]'),
    ],
)
async def test_unknown_services_and_the_v1alpha3_service_are_refused(
    versions: list[str], quoted: str
) -> None:
    async with dra_node() as node:
        p = plugin(node, supported_versions=versions)
        assert await refusal(p) == (
            f"{REFUSED}invalid supported gRPC versions of DRA driver plugin {DRIVER} at endpoint "
            f"{p.endpoint}: none of services supported by the plugin "
            f'({quoted}) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])'
        )
        assert node.plugins.drivers() == []


async def test_bad_driver_names_and_endpoints_are_refused() -> None:
    async with dra_node() as node:
        error = await refusal(plugin(node, driver=""))
        assert error == "RegisterPlugin error -- plugin validation failed with err: DRA driver name is empty"
        error = await refusal(plugin(node, driver="GPU_Example"))
        assert error.startswith(
            f'{REFUSED}invalid DRA driver name "GPU_Example": a lowercase RFC 1123 subdomain must '
            "consist of lower case alphanumeric characters"
        )
        error = await refusal(plugin(node, info_endpoint="relative.sock"))
        assert error == (
            'RegisterPlugin error -- plugin validation failed with err: invalid endpoint "relative.sock" of '
            f"DRA driver plugin {DRIVER}: it must be an absolute path"
        )
        long = "/" + "x" * 120 + ".sock"
        error = await refusal(plugin(node, info_endpoint=long))
        assert error == (
            f'RegisterPlugin error -- plugin validation failed with err: invalid endpoint "{long}" of '
            f"DRA driver plugin {DRIVER}: it is longer than 107 bytes, the limit of a unix socket path"
        )
        assert node.plugins.drivers() == [] and node.registered == []


async def test_a_second_registration_of_one_endpoint_is_refused() -> None:
    async with dra_node() as node, plugin(node, "-a") as first:
        await first.wait_for_status()
        # A second plugin whose GetInfo names the first one's endpoint.
        async with plugin(node, "-b", info_endpoint=first.endpoint) as second:
            status = await second.wait_for_status()
        assert (status.plugin_registered, status.error) == (
            False,
            "RegisterPlugin error -- plugin registration failed with err: "
            f"endpoint {first.endpoint} already registered for DRA driver plugin {DRIVER}",
        )
        [driver] = node.plugins.drivers()
        assert [e.endpoint for e in driver.endpoints] == [first.endpoint]


async def test_deregistration_removes_only_its_own_endpoint() -> None:
    async with dra_node() as node, plugin(node, "-a") as a:
        await a.wait_for_status()
        b = plugin(node, "-b")
        await b.start()
        try:
            await b.wait_for_status()
            await poll_async(
                lambda: all(e.connected for e in node.plugins.drivers()[0].endpoints), "connected"
            )
            assert node.plugins.get(DRIVER).endpoint == b.endpoint  # the newest connected
        finally:
            await b.stop()  # its registration socket is gone: the watcher deregisters it
        await poll_async(lambda: len(node.plugins.drivers()[0].endpoints) == 1, "b deregistered")
        [driver] = node.plugins.drivers()
        assert [e.endpoint for e in driver.endpoints] == [a.endpoint]
        client = node.plugins.get(DRIVER)
        assert client.endpoint == a.endpoint
        await client.node_unprepare_resources([])
        assert len(a.calls) == 1 and b.calls == []
        assert node.wiped == []


async def test_a_registration_socket_made_again_is_deregistered_then_registered() -> None:
    async with dra_node() as node, plugin(node) as p:
        assert (await p.wait_for_status()).plugin_registered
        await p.stop_registration()
        await p.start_registration()  # the same path, a new socket: the same endpoint registers again
        second = await p.wait_for_status(2)
        assert (second.plugin_registered, second.error) == (True, "")
        [driver] = node.plugins.drivers()
        assert [e.endpoint for e in driver.endpoints] == [p.endpoint]
        assert node.registered == [DRIVER, DRIVER]


async def test_an_endpoint_served_by_the_registration_socket_itself() -> None:
    async with dra_node() as node, plugin(node, info_endpoint="") as p:
        assert (await p.wait_for_status()).plugin_registered
        client = node.plugins.get(DRIVER)
        assert client.endpoint == p.registration_socket
        assert await client.node_unprepare_resources([]) == {}
        assert len(p.calls) == 1


class Widgets(DevicePlugin):
    resource_name = "example.com/widget"
    poll_interval = 0.05

    async def devices(self) -> Sequence[Device]:
        return [Device("w-0")]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation()


async def test_one_watcher_dispatches_device_plugins_and_dra_plugins_and_refuses_other_types() -> None:
    plugin_dir = short_tempdir("kd-dp-")
    manager = DeviceManager(plugin_dir)
    await manager.start()
    try:
        async with (
            dra_node(extra_handlers={DEVICE_PLUGIN_TYPE: manager.plugin_handler}) as node,
            plugin(node) as dra,
            PluginServer(Widgets(), plugin_watcher=True, registry_dir=str(node.registry)),
        ):
            assert (await dra.wait_for_status()).plugin_registered
            await poll_async(
                lambda: [r.resource_name for r in manager.registered_resources()] == ["example.com/widget"],
                "the device plugin registered with the device manager",
            )
            assert [d.name for d in node.plugins.drivers()] == [DRIVER]
            other = plugin(node, "-csi", plugin_type="CSIPlugin")
            assert await refusal(other) == (
                "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at socket "
                f"{other.registration_socket}"
            )
    finally:
        await manager.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
