"""The DRA manager against a raw DRA plugin over real unix sockets: the kubelet's scenarios that need no
daemon (prepare, batching, shared claims, failures, restarts, reconcile, the fixed kubelet bugs)."""

from __future__ import annotations

import asyncio
import re

import grpc
import pytest

from kubedevice.dra import (
    ContainerClaim,
    DRACheckpointError,
    DRAContainer,
    DRAPod,
    OwnerReference,
    PodClaim,
    PrepareError,
    ResourceClaim,
    UnprepareError,
)
from kubedevice.dra.types import DriverClaim
from tests.dra_manager_env import allocated, dra_manager_env, gpu, pod
from tests.dra_plugin import PREPARE, UNPREPARE, Device
from tests.waiting import poll_async

DRIVER = "gpu.example.com"


async def test_happy_path_scenario_5() -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        p = pod("P", "c1", name="p")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0")))
        plugin.set_devices("u1", gpu("gpu-0"))
        assert await env.manager.prepare_resources(p) == [DriverClaim("default", "u1", "c1")]
        (call,) = plugin.calls
        assert (call.method, call.service, call.claims) == (
            PREPARE,
            "v1.DRAPlugin",
            (DriverClaim("default", "u1", "c1"),),
        )
        assert env.manager.get_resources(p, p.containers[0]) == ["gpu.example.com/gpu=gpu-0"]
        (entry,) = env.checkpoint().claims or ()
        assert (entry.claim_uid, entry.claim_name, entry.namespace, entry.pod_uids) == (
            "u1",
            "c1",
            "default",
            {"P"},
        )
        ((driver, devices),) = (entry.driver_state or {}).items()
        assert driver == DRIVER
        assert [(d.pool_name, d.device_name, d.request_names, d.cdi_device_ids) for d in devices or ()] == [
            ("node-1", "gpu-0", ("gpu",), ("gpu.example.com/gpu=gpu-0",))
        ]
        (dynamic,) = env.manager.get_dynamic_resources(p, p.containers[0])
        assert (dynamic.claim_name, dynamic.claim_namespace) == ("c1", "default")
        assert [
            (r.driver_name, r.pool_name, r.device_name, r.cdi_devices) for r in dynamic.claim_resources
        ] == [(DRIVER, "node-1", "gpu-0", ("gpu.example.com/gpu=gpu-0",))]
        assert env.manager.pod_might_need_to_unprepare_resources("P")
        # The same pod prepared again (a sandbox re-created): the claim is prepared, no call.
        assert await env.manager.prepare_resources(p) == []
        assert len(plugin.calls) == 1
        assert (
            env.prometheus.get_sample_value(
                "dra_operations_duration_seconds_count",
                {"operation_name": "PrepareResources", "is_error": "false"},
            )
            == 2
        )


async def test_batching_scenario_6_one_call_per_plugin_in_spec_order() -> None:
    async with dra_manager_env() as env:
        gpus = await env.start_plugin()
        nics = await env.start_plugin("nic.example.com")
        p = pod("P", "c1", "c2", "c3")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0")))
        env.claims.put(allocated("c2", "u2", [p], ("gpu", DRIVER, "gpu-1")))
        env.claims.put(
            allocated("c3", "u3", [p], ("gpu", DRIVER, "gpu-2"), ("nic", "nic.example.com", "eth0"))
        )
        await env.manager.prepare_resources(p)
        assert [[c.name for c in call.claims] for call in gpus.calls] == [["c1", "c2", "c3"]]
        assert [[c.name for c in call.claims] for call in nics.calls] == [["c3"]]
        # A driver that returned no device still has its key in the checkpoint, with null devices.
        assert env.checkpoint_claims()["default/c3"][1] == {DRIVER: [], "nic.example.com": []}


async def test_shared_claim_scenario_7_last_pod_out_unprepares() -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        a, b = pod("A", "c1"), pod("B", "c1")
        env.claims.put(allocated("c1", "u1", [a, b], ("gpu", DRIVER, "gpu-0")))
        plugin.set_devices("u1", gpu("gpu-0"))
        await env.manager.prepare_resources(a)
        await env.manager.prepare_resources(b)
        assert len(plugin.calls_of(PREPARE)) == 1
        assert env.checkpoint_claims()["default/c1"][0] == {"A", "B"}
        assert await env.manager.unprepare_resources(a) == []
        assert plugin.calls_of(UNPREPARE) == []
        assert env.checkpoint_claims()["default/c1"][0] == {"B"}
        assert not env.manager.pod_might_need_to_unprepare_resources("A")
        assert await env.manager.unprepare_resources(b) == [DriverClaim("default", "u1", "c1")]
        assert [c.claims for c in plugin.calls_of(UNPREPARE)] == [(DriverClaim("default", "u1", "c1"),)]
        assert env.checkpoint().claims == ()
        assert await env.manager.unprepare_resources(b) == []  # idempotent
        assert len(plugin.calls_of(UNPREPARE)) == 1


async def test_skipped_claim_scenario_8_retry_lists_devices_once() -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        p = pod("P", "c1", "c2")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0")))
        env.claims.put(allocated("c2", "u2", [p], ("gpu", DRIVER, "gpu-1")))
        plugin.set_devices("u1", gpu("gpu-0"))
        plugin.set_devices("u2", gpu("gpu-1"))
        plugin.omit("u2")
        with pytest.raises(PrepareError) as failed:
            await env.manager.prepare_resources(p)
        assert str(failed.value) == "prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims"
        # Recorded before the call, so a crash or a deletion now is unprepared later.
        assert env.checkpoint_claims()["default/c2"][0] == {"P"}
        plugin.behaviour.omitted.clear()
        await env.manager.prepare_resources(p)
        assert [[c.name for c in call.claims] for call in plugin.calls_of(PREPARE)] == [
            ["c1", "c2"],
            ["c1", "c2"],
        ]
        assert env.checkpoint_claims()["default/c1"][1] == {DRIVER: ["gpu-0"]}
        assert env.manager.get_resources(p, p.containers[0]) == [
            "gpu.example.com/gpu=gpu-0",
            "gpu.example.com/gpu=gpu-1",
        ]


@pytest.mark.parametrize(
    ("setup", "cause"),
    [
        (
            lambda pl: pl.set_error("u1", "GPU busy"),
            "NodePrepareResources failed for ResourceClaim c1: GPU busy",
        ),
        (
            lambda pl: pl.answer_unknown("zzz"),
            "NodePrepareResources returned result for unknown claim UID zzz",
        ),
        (
            lambda pl: pl.fail(PREPARE, grpc.StatusCode.INTERNAL, "driver exploded"),
            "NodePrepareResources: rpc error: code = Internal desc = driver exploded",
        ),
        (
            lambda pl: pl.set_devices("u1", Device("node-1", "gpu-0", cdi_device_ids=("not-a-cdi-id",))),
            "NodePrepareResources returned an invalid CDI device ID for ResourceClaim c1: CDI device "
            "'not-a-cdi-id' is not fully qualified — write it as vendor/class=name",
        ),
        (
            lambda pl: pl.set_devices("u1", Device("node-1", "", cdi_device_ids=("a.com/b=c",))),
            "NodePrepareResources returned a device without pool or device name for ResourceClaim c1: "
            "pool 'node-1', device ''",
        ),
    ],
    ids=["per-claim-error", "unknown-uid", "grpc-error", "bad-cdi-id", "no-device-name"],
)
async def test_bad_answers_scenarios_9_10_fail_the_pod_with_the_kubelets_text(
    setup: object, cause: str
) -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        p = pod("P", "c1")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0")))
        setup(plugin)  # type: ignore[operator]
        with pytest.raises(PrepareError) as failed:
            await env.manager.prepare_resources(p)
        assert str(failed.value) == f"prepare dynamic resources: {cause}"
        ((state, prepared),) = env.manager.claim_infos()
        assert not prepared and state.pod_uids == {"P"}


async def test_driver_never_registered_scenario_11_caches_nothing_b4() -> None:
    async with dra_manager_env() as env:
        await env.start_plugin()
        p = pod("P", "c1")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", "other.example.com", "gpu-0")))
        with pytest.raises(PrepareError) as failed:
            await env.manager.prepare_resources(p)
        assert (
            str(failed.value) == "prepare dynamic resources: DRA driver other.example.com is not registered"
        )
        assert env.checkpoint().claims is None  # untouched: still the fresh file
        assert not env.manager.pod_might_need_to_unprepare_resources("P")
        assert await env.manager.unprepare_resources(p) == []
        env.claims.put(allocated("c1", "u1", [p], ("gpu", "", "gpu-0")))
        with pytest.raises(PrepareError, match=r"^prepare dynamic resources: DRA driver name is empty$"):
            await env.manager.prepare_resources(p)


async def test_claim_checks_scenarios_12_14_16_and_missing_claims() -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        p = pod("P", "c1", name="p")
        q = pod("Q", name="q")
        env.claims.put(allocated("c1", "u1", [q], ("gpu", DRIVER, "gpu-0")))
        cases: list[tuple[DRAPod, str]] = [
            (p, "pod p (P) is not allowed to use ResourceClaim c1 (u1)"),
            (
                pod("P", "gone", name="p"),
                'fetch ResourceClaim gone: resourceclaims.resource.k8s.io "gone" not found',
            ),
        ]
        templated = DRAPod(
            "P",
            "default",
            "p",
            resource_claims=(PodClaim("gpu", resource_claim_template_name="gpu-tmpl"),),
            claim_statuses={"gpu": "p-gpu-x"},
        )
        env.claims.put(
            ResourceClaim(
                "default",
                "p-gpu-x",
                "ux",
                owner_references=(OwnerReference("v1", "Pod", "p", "OTHER", controller=True),),
            )
        )
        cases.append(
            (templated, "ResourceClaim default/p-gpu-x was not created for pod default/p (pod is not owner)")
        )
        not_created = DRAPod(
            "P", "default", "p", resource_claims=(PodClaim("gpu", resource_claim_template_name="t"),)
        )
        cases.append((not_created, 'pod "default/p": ResourceClaim not created yet'))
        unallocated = pod("P", "c9", name="p")
        env.claims.put(
            ResourceClaim("default", "c9", "u9", reserved_for=allocated("x", "x", [p]).reserved_for)
        )
        cases.append((unallocated, "ResourceClaim c9: not allocated"))
        for the_pod, cause in cases:
            with pytest.raises(PrepareError) as failed:
                await env.manager.prepare_resources(the_pod)
            assert str(failed.value) == f"prepare dynamic resources: {cause}"
        assert plugin.calls == []
        assert env.checkpoint().claims is None


async def test_name_reuse_scenario_17_old_uid_still_cached_b3() -> None:
    async with dra_manager_env() as env:
        await env.start_plugin()
        a, b = pod("A", "c1"), pod("B", "c1")
        env.claims.put(allocated("c1", "u1", [a], ("gpu", DRIVER, "gpu-0")))
        await env.manager.prepare_resources(a)
        env.claims.put(allocated("c1", "u2", [b], ("gpu", DRIVER, "gpu-0")))
        with pytest.raises(PrepareError) as failed:
            await env.manager.prepare_resources(b)
        assert str(failed.value) == (
            "prepare dynamic resources: old ResourceClaim with same name c1 and different UID u1 "
            "still exists (previous pod force-deleted?!)"
        )
        assert env.checkpoint_claims()["default/c1"][0] == {"A"}


async def test_restart_scenario_19_no_second_prepare_and_no_duplicate_devices() -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        p, q = pod("P", "c1"), pod("Q", "c1")
        env.claims.put(allocated("c1", "u1", [p, q], ("gpu", DRIVER, "gpu-0")))
        plugin.set_devices("u1", gpu("gpu-0"))
        await env.manager.prepare_resources(p)
        before = env.manager.checkpoint_path.read_bytes()
        await env.restart_manager()
        assert env.manager.checkpoint_path.read_bytes() == before
        # Containers of running pods keep their CDI IDs at once, without any call.
        assert env.manager.get_resources(p, p.containers[0]) == ["gpu.example.com/gpu=gpu-0"]
        ((state, prepared),) = env.manager.claim_infos()
        assert not prepared and state.pod_uids == {"P"}
        await plugin.wait_for_status(2)  # the new watcher registered the plugin again
        await env.manager.prepare_resources(q)
        assert len(plugin.calls_of(PREPARE)) == 2  # the restored entry is unprepared: one more call
        assert env.checkpoint_claims()["default/c1"] == ({"P", "Q"}, {DRIVER: ["gpu-0"]})
        assert env.manager.get_resources(q, q.containers[0]) == ["gpu.example.com/gpu=gpu-0"]


async def test_reconcile_scenario_20_waits_for_sources_ready() -> None:
    async with dra_manager_env(reconcile_period=3600) as env:
        plugin = await env.start_plugin()
        p = pod("P", "c1")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0")))
        await env.manager.prepare_resources(p)
        await env.restart_manager()
        await plugin.wait_for_status(2)
        assert await env.manager.reconcile() == 0
        assert plugin.calls_of(UNPREPARE) == []  # sources are not ready: nothing is known to be gone
        env.manager.sources_ready = True  # the pod's manifest is gone: env.active is empty
        await poll_async(
            lambda: not env.manager.pod_might_need_to_unprepare_resources("P"), "the reconcile pass"
        )
        assert [c.claims for c in plugin.calls_of(UNPREPARE)] == [(DriverClaim("default", "u1", "c1"),)]
        assert env.checkpoint().claims == ()


async def test_stale_cross_pod_unprepare_scenario_21_b5() -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        a, b = pod("A", "c1"), pod("B", "c1")
        env.claims.put(allocated("c1", "u1", [a], ("gpu", DRIVER, "gpu-0")))
        await env.manager.prepare_resources(a)
        with pytest.raises(PrepareError, match="not allowed to use"):
            await env.manager.prepare_resources(b)  # failed before c1 was recorded for it
        assert await env.manager.unprepare_resources(b) == []
        assert plugin.calls_of(UNPREPARE) == []
        assert env.checkpoint_claims()["default/c1"][0] == {"A"}


async def test_hung_plugin_fails_only_its_pods_at_the_deadline() -> None:
    async with dra_manager_env(call_timeout=0.5) as env:
        slow = await env.start_plugin()
        fast = await env.start_plugin("nic.example.com")
        p, q = pod("P", "c1"), pod("Q", "c2")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0")))
        env.claims.put(allocated("c2", "u2", [q], ("nic", "nic.example.com", "eth0")))
        slow.hang(PREPARE)
        hung = asyncio.create_task(env.manager.prepare_resources(p))
        await slow.wait_for_calls(1)
        assert await env.manager.prepare_resources(q) == [DriverClaim("default", "u2", "c2")]
        with pytest.raises(PrepareError) as failed:
            await hung
        assert str(failed.value) == (
            "prepare dynamic resources: NodePrepareResources: rpc error: code = DeadlineExceeded "
            "desc = context deadline exceeded"
        )
        slow.release()
        assert len(fast.calls) == 1


async def test_prepare_of_a_shared_claim_waits_for_its_unprepare_b6() -> None:
    async with dra_manager_env() as env:
        plugin = await env.start_plugin()
        a, b = pod("A", "c1"), pod("B", "c1")
        env.claims.put(allocated("c1", "u1", [a, b], ("gpu", DRIVER, "gpu-0")))
        plugin.set_devices("u1", gpu("gpu-0"))
        await env.manager.prepare_resources(a)
        plugin.hang(UNPREPARE)
        leaving = asyncio.create_task(env.manager.unprepare_resources(a))
        await plugin.wait_for_calls(2)
        joining = asyncio.create_task(env.manager.prepare_resources(b))
        for _ in range(50):  # loop turns: the prepare gets as far as it can
            await asyncio.sleep(0)
        assert not joining.done()  # holds until the unprepare of c1 is over
        plugin.release()
        await leaving
        assert await joining == [DriverClaim("default", "u1", "c1")]
        assert [c.method for c in plugin.calls] == [PREPARE, UNPREPARE, PREPARE]
        assert env.checkpoint_claims()["default/c1"] == ({"B"}, {DRIVER: ["gpu-0"]})


async def test_unprepare_waits_for_its_driver_scenario_43() -> None:
    async with dra_manager_env(reconcile_period=3600) as env:
        plugin = await env.start_plugin()
        p = pod("P", "c1")
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0")))
        await env.manager.prepare_resources(p)
        await plugin.stop()
        # The watcher sees the registration socket go at its next look; until then the endpoint is only
        # disconnected and a call fails with a connection error instead.
        await poll_async(
            lambda: not any(d.endpoints for d in env.manager.drivers()), "the driver's deregistration"
        )
        with pytest.raises(UnprepareError) as failed:
            await env.manager.unprepare_resources(p)
        assert (
            str(failed.value) == "unprepare dynamic resources: DRA driver gpu.example.com is not registered"
        )
        assert env.manager.pod_might_need_to_unprepare_resources("P")
        env.manager.sources_ready = True
        await plugin.start()  # registration runs a reconcile pass: the pod is not active
        await poll_async(
            lambda: not env.manager.pod_might_need_to_unprepare_resources("P"), "the reconcile pass"
        )
        assert [c.method for c in plugin.calls] == [PREPARE, UNPREPARE]


async def test_request_filtering_and_wipe_after_the_last_plugin_leaves() -> None:
    async with dra_manager_env(wipe_delay=0.2) as env:
        plugin = await env.start_plugin()
        p = DRAPod(
            "P",
            "default",
            "p",
            resource_claims=(PodClaim("c", resource_claim_name="c1"),),
            containers=(
                DRAContainer("gpu-only", (ContainerClaim("c", "gpu"),)),
                DRAContainer("all", (ContainerClaim("c"),)),
            ),
        )
        env.claims.put(allocated("c1", "u1", [p], ("gpu", DRIVER, "gpu-0"), ("nic", DRIVER, "eth0")))
        plugin.set_devices(
            "u1",
            gpu("gpu-0"),
            Device("node-1", "eth0", request_names=("nic",), cdi_device_ids=("gpu.example.com/nic=eth0",)),
            Device("node-1", "common", cdi_device_ids=("gpu.example.com/gpu=common",)),
        )
        await env.manager.prepare_resources(p)
        assert env.manager.get_resources(p, p.containers[0]) == [
            "gpu.example.com/gpu=gpu-0",
            "gpu.example.com/gpu=common",
        ]
        assert len(env.manager.get_resources(p, p.containers[1])) == 3
        await plugin.stop()
        await poll_async(lambda: env.wiped, "the wipe of the driver's slices")
        assert env.wiped == [DRIVER]
        # Prepared claims outlive the driver's slices.
        assert env.manager.get_resources(p, p.containers[1])


async def test_corrupt_checkpoint_refuses_to_start_with_the_kubelets_text() -> None:
    async with dra_manager_env() as env:
        path = env.manager.checkpoint_path
        await env.manager.stop()
        path.write_bytes(re.sub(rb'"Checksum":\d+', b'"Checksum":1', path.read_bytes()))
        with pytest.raises(DRACheckpointError) as failed:
            await env.restart_manager()
        assert str(failed.value) == (
            "create ResourceClaim cache: GetOrCreate() on checkpoint state: "
            "failed to get checkpoint dra_manager_state: checkpoint is corrupted"
        )
        assert failed.value.corrupt
