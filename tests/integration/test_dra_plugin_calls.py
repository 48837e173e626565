"""Calls to DRA plugins through the store: answers as sent, Go's error texts, deadlines, metrics, the v1beta1
stub, and connection changes (newest connected endpoint, a restart on the same socket, the wiping delay)."""

from __future__ import annotations

import grpc
import pytest

from kubedevice.checkpoint.dra_model import DRADevice
from kubedevice.dra.client import PrepareResult
from kubedevice.dra.errors import DRACallError, DriverLookupError
from kubedevice.dra.types import DriverClaim
from tests.dra_node import DRANode, dra_node
from tests.dra_plugin import PREPARE, UNPREPARE, Call, Device, DRATestPlugin
from tests.waiting import poll_async

DRIVER = "gpu.example.com"
C1, C2 = DriverClaim("default", "u1", "c1"), DriverClaim("default", "u2", "c2")
GPU0 = Device("node-1", "gpu-0", ("gpu",), ("gpu.example.com/gpu=gpu-0",))
V1_PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"


def plugin(node: DRANode, name: str = "", **kwargs: object) -> DRATestPlugin:
    return DRATestPlugin(
        node.registry,
        node.sockets,
        driver=DRIVER,
        registration_name=f"{DRIVER}{name}-reg.sock",
        endpoint=str(node.sockets / f"{DRIVER}{name}.sock"),
        **kwargs,  # type: ignore[arg-type]
    )


async def registered(node: DRANode, p: DRATestPlugin) -> None:
    assert (await p.wait_for_status()).plugin_registered
    await poll_async(lambda: node.plugins.get(DRIVER).connected, "the plugin connected")


async def test_answers_come_back_as_the_plugin_sent_them() -> None:
    async with dra_node() as node, plugin(node) as p:
        await registered(node, p)
        p.set_devices("u1", GPU0, Device("node-1", "gpu-1", share_id="s-1"))
        p.set_error("u2", "GPU busy")
        p.answer_unknown("zzz")
        client = node.plugins.get(DRIVER)
        assert await client.node_prepare_resources([C1, C2]) == {
            "u1": PrepareResult(
                (
                    DRADevice("node-1", "gpu-0", ("gpu",), ("gpu.example.com/gpu=gpu-0",)),
                    # Empty lists are Go's nil; v1 keeps the share ID.
                    DRADevice("node-1", "gpu-1", None, None, share_id="s-1"),
                ),
                "",
            ),
            "u2": PrepareResult((), "GPU busy"),
            "zzz": PrepareResult((), ""),
        }
        p.omit("u2")
        p.set_error("u1", "still in use", method=UNPREPARE)
        assert await client.node_unprepare_resources([C1, C2]) == {"u1": "still in use", "zzz": ""}
        assert p.calls == [
            Call(PREPARE, "v1.DRAPlugin", (C1, C2)),
            Call(UNPREPARE, "v1.DRAPlugin", (C1, C2)),
        ]
        assert (
            node.sample(
                "dra_grpc_operations_duration_seconds_count",
                driver_name=DRIVER,
                method_name=V1_PREPARE,
                grpc_status_code="OK",
            )
            == 1.0
        )


async def test_a_v1beta1_plugin_is_called_through_the_v1beta1_service() -> None:
    async with dra_node() as node, plugin(node, serve=["v1beta1.DRAPlugin"]) as p:
        await registered(node, p)
        p.set_devices("u1", Device("node-1", "gpu-0", share_id="lost"))
        client = node.plugins.get(DRIVER)
        assert client.service == "v1beta1.DRAPlugin"
        result = await client.node_prepare_resources([C1])
        assert result == {"u1": PrepareResult((DRADevice("node-1", "gpu-0"),), "")}  # no share ID in v1beta1
        assert p.calls == [Call(PREPARE, "v1beta1.DRAPlugin", (C1,))]
        assert (
            node.sample(
                "dra_grpc_operations_duration_seconds_count",
                driver_name=DRIVER,
                method_name="/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
                grpc_status_code="OK",
            )
            == 1.0
        )


async def test_a_failed_call_reads_as_gos_rpc_error() -> None:
    async with dra_node() as node, plugin(node) as p:
        await registered(node, p)
        p.fail(UNPREPARE, grpc.StatusCode.FAILED_PRECONDITION, "driver not ready")
        with pytest.raises(DRACallError) as caught:
            await node.plugins.get(DRIVER).node_unprepare_resources([C1])
        assert str(caught.value) == "rpc error: code = FailedPrecondition desc = driver not ready"
        assert (
            node.sample(
                "dra_grpc_operations_duration_seconds_count",
                driver_name=DRIVER,
                method_name="/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
                grpc_status_code="FailedPrecondition",
            )
            == 1.0
        )


async def test_a_hung_plugin_fails_the_call_at_the_deadline() -> None:
    async with dra_node(call_timeout=0.3) as node, plugin(node) as p:
        await registered(node, p)
        p.hang(PREPARE, "u1")
        p.set_default_devices(lambda claim: [Device("node-1", f"for-{claim.name}")])
        result = await node.plugins.get(DRIVER).node_prepare_resources([C2])  # not a claim that hangs
        assert result == {"u2": PrepareResult((DRADevice("node-1", "for-c2"),), "")}
        with pytest.raises(DRACallError) as caught:
            await node.plugins.get(DRIVER).node_prepare_resources([C1])
        assert str(caught.value) == "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
        assert (
            node.sample(
                "dra_grpc_operations_duration_seconds_count",
                driver_name=DRIVER,
                method_name=V1_PREPARE,
                grpc_status_code="DeadlineExceeded",
            )
            == 1.0
        )
        p.release()


async def test_lookups_of_an_empty_or_unknown_driver_fail_with_the_kubelets_text() -> None:
    async with dra_node() as node:
        with pytest.raises(DriverLookupError) as empty:
            node.plugins.get("")
        assert str(empty.value) == "DRA driver name is empty"
        with pytest.raises(DriverLookupError) as unknown:
            node.plugins.get("other.example.com")
        assert str(unknown.value) == "DRA driver other.example.com is not registered"


async def test_calls_go_to_the_newest_connected_endpoint_and_a_restart_is_found_without_registering() -> None:
    async with dra_node() as node, plugin(node, "-a") as a:
        await registered(node, a)
        async with plugin(node, "-b") as b:
            await b.wait_for_status()
            await poll_async(
                lambda: node.plugins.get(DRIVER).endpoint == b.endpoint, "b is the newest connected"
            )
            await b.stop_endpoint()
            # b is still registered but disconnected: a, connected, is preferred.
            await poll_async(lambda: node.plugins.get(DRIVER).endpoint == a.endpoint, "a preferred")
            [driver] = node.plugins.drivers()
            assert [(e.endpoint, e.connected) for e in driver.endpoints] == [
                (a.endpoint, True),
                (b.endpoint, False),
            ]
            await node.plugins.get(DRIVER).node_prepare_resources([C1])
            assert len(a.calls) == 1
            await b.start_endpoint()  # the same socket again; its registration socket never changed
            await poll_async(lambda: node.plugins.get(DRIVER).endpoint == b.endpoint, "b found again")
            await node.plugins.get(DRIVER).node_prepare_resources([C1])
            assert len(b.calls) == 1
            assert len(b.statuses) == 1 and node.registered == [DRIVER, DRIVER]
        # With no endpoint connected at all, calls go to the newest registered one.
        await a.stop_endpoint()
        await poll_async(lambda: not node.plugins.get(DRIVER).connected, "a disconnected")
        with pytest.raises(DRACallError) as caught:
            await node.plugins.get(DRIVER).node_prepare_resources([C1])
        assert str(caught.value).startswith("rpc error: code = Unavailable desc = ")


async def test_a_driver_without_a_connected_endpoint_is_wiped_after_the_delay() -> None:
    async with dra_node(wipe_delay=0.3) as node:
        async with plugin(node) as p:
            await registered(node, p)
            await p.stop_endpoint()
            await poll_async(lambda: node.wiped, "the wipe of a disconnected driver")
            assert node.wiped == [DRIVER]
            [driver] = node.plugins.drivers()
            assert not driver.wipe_pending and not driver.endpoints[0].connected
        # Deregistered, the driver is again without a connected endpoint: one more wipe, the delay later.
        await poll_async(lambda: node.wiped == [DRIVER, DRIVER], "the wipe after deregistration")
        assert node.plugins.drivers() == []


async def test_a_registration_within_the_delay_cancels_the_wipe() -> None:
    delay = 3.0  # the plugin must come back within it on a loaded machine
    async with dra_node(wipe_delay=delay) as node:
        p = plugin(node)
        async with p:
            await registered(node, p)
        await poll_async(
            lambda: [(d.wipe_pending, d.endpoints) for d in node.plugins.drivers()] == [(True, ())],
            "deregistered, its wipe pending",
        )
        async with plugin(node) as again:
            await registered(node, again)
            assert [(d.name, d.wipe_pending) for d in node.plugins.drivers()] == [(DRIVER, False)]
            assert node.wiped == []
        # Gone again: this wipe fires, and only this one (the first was cancelled).
        await poll_async(lambda: node.wiped, "the second wipe")
        assert node.wiped == [DRIVER]


async def test_rolling_update_of_a_driver() -> None:
    """Two instances of one driver (registration sockets `<driver>-A-reg.sock`, `<driver>-B-reg.sock`)."""
    async with dra_node(wipe_delay=0.3) as node, plugin(node, "-A") as a:
        await registered(node, a)
        b = plugin(node, "-B")
        await b.start()
        await b.wait_for_status()
        await poll_async(lambda: node.plugins.get(DRIVER).endpoint == b.endpoint, "calls go to B")
        await a.stop()  # the old instance ends: B stays registered, nothing is wiped
        await poll_async(lambda: len(node.plugins.drivers()[0].endpoints) == 1, "A deregistered")
        assert node.plugins.get(DRIVER).endpoint == b.endpoint and node.wiped == []
        await b.stop()
        await poll_async(lambda: node.wiped, "the wipe after the last instance stopped")
        assert node.wiped == [DRIVER] and node.plugins.drivers() == []
        await b.start()  # B again: it registers, and calls go to it
        assert (await b.wait_for_status(2)).plugin_registered
        await poll_async(lambda: node.plugins.get(DRIVER).connected, "B connected again")
        await node.plugins.get(DRIVER).node_prepare_resources([C1])
        assert b.calls == [Call(PREPARE, "v1.DRAPlugin", (C1,))]
        await b.stop()
