"""Allocation, run options, GC and topology hints against real plugins."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager import (
    AdmissionError,
    Container,
    DeviceManager,
    Pod,
    RunOptionsError,
    TopologyHint,
)
from kubedevice.topology.scope import HintStore
from tests.integration.fakeplugin import (
    FakePlugin,
    default_allocate,
    device,
    eventually,
    held,
    make_devices,
    one,
    registered,
    running_manager,
    serving,
)

R = "example.com/fake"
R2 = "example.com/other"


async def test_allocate_records_devices_and_writes_the_checkpoint(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(4))
        async with serving(plugin):
            await registered(m, plugin)
            pod, c = one("pod-1", 2)
            await m.allocate(pod, c)
            devs = held(m, "pod-1", "c")
            assert len(devs) == 2 and plugin.allocate_calls == [sorted(devs)]
            text = (m.plugin_dir / "kubelet_internal_checkpoint").read_text()
            assert '"PodUID":"pod-1"' in text
            histogram = m.metrics.registry.get_sample_value(
                "kubelet_device_plugin_alloc_duration_seconds_count", {"resource_name": R}
            )
            assert histogram == 1
            # Allocating the same container again is a no-op: nothing new, no RPC.
            await m.allocate(pod, c)
            assert len(plugin.allocate_calls) == 1
            assert m.get_capacity()[1] == {R: 4}  # allocatable counts healthy devices, allocated or not


async def test_allocation_error_texts(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2))
        sick = FakePlugin(m.plugin_dir / "s.sock", R2, make_devices(2, health="Unhealthy"))
        async with serving(plugin, sick):
            await registered(m, plugin)
            await registered(m, sick, healthy=0)
            with pytest.raises(AdmissionError) as err:
                await m.allocate(*one("pod-1", 3))
            assert (
                str(err.value)
                == f"requested number of devices unavailable for {R}. Requested: 3, Available: 2"
            )
            with pytest.raises(AdmissionError) as err:
                await m.allocate(*one("pod-2", 1, R2))
            assert str(err.value) == f"no healthy devices present; cannot allocate unhealthy devices {R2}"
            pod, c = one("pod-3", 1)
            await m.allocate(pod, c)
            with pytest.raises(AdmissionError) as err:
                await m.allocate(pod, Container("c", {R: 2}))
            assert (
                str(err.value) == f'pod "pod-3" container "c" changed request for resource "{R}" from 1 to 2'
            )
            # The device goes unhealthy: the same request is now refused.
            mine = held(m, "pod-3", "c")
            plugin.set_devices(
                [device(d.ID, "Unhealthy" if d.ID in mine else "Healthy") for d in plugin.devices]
            )
            await eventually(lambda: m.get_capacity()[1] == {R: 1, R2: 0})
            with pytest.raises(AdmissionError) as err:
                await m.allocate(pod, c)
            assert str(err.value) == (
                f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {R}"
            )
            # Nothing was lost or leaked: the one healthy device is still free.
            await m.allocate(*one("pod-4", 1))


async def test_a_zero_request_gets_nothing_but_is_checked_like_any_other(root: Path) -> None:
    """A zero quantity: no device, no Allocate, no PreStartContainer, no run options, no checkpoint entry.

    The kubelet still checks the resource's registration and health first (its devicesToAllocate checks
    before it counts what is needed, kubernetes#109595), except for a container that is already running.
    """
    async with running_manager(root) as m:
        pre_start = dp.DevicePluginOptions(pre_start_required=True)
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2), options=pre_start)
        async with serving(plugin):
            await registered(m, plugin)
            pod, c = one("pod-1", 0)
            await m.allocate(pod, c)
            assert await m.get_device_run_container_options(pod, c) is None
            assert plugin.allocate_calls == [] and plugin.prestart_calls == []
            assert m.pod_uids() == set() and m.get_devices("pod-1", "c") is None
            checkpoint = m.plugin_dir / "kubelet_internal_checkpoint"
            await eventually(checkpoint.exists)  # the registration's write does not wait for the disk
            assert '"PodUID":"pod-1"' not in checkpoint.read_text()
            plugin.set_devices([device(d.ID, "Unhealthy") for d in plugin.devices])
            await eventually(lambda: m.get_capacity()[1] == {R: 0})
            with pytest.raises(AdmissionError) as err:
                await m.allocate(*one("pod-2", 0))
            assert str(err.value) == f"no healthy devices present; cannot allocate unhealthy devices {R}"
            # A container that survived a restart is not checked: it already runs with what it has.
            await m.allocate(pod, c, already_running=True)
            assert await m.get_device_run_container_options(pod, c, already_running=True) is None
            assert plugin.allocate_calls == [] and plugin.prestart_calls == [] and m.pod_uids() == set()


async def test_negative_request_is_refused(root: Path) -> None:
    async with running_manager(root) as m:
        with pytest.raises(AdmissionError, match=r"negative quantity -1 of example\.com/fake"):
            await m.allocate(*one("pod-1", -1))


@pytest.mark.parametrize("responses", [0, 2])
async def test_plugin_answering_zero_or_two_container_responses(root: Path, responses: int) -> None:
    async def allocate(request: dp.AllocateRequest) -> dp.AllocateResponse:
        resp = dp.AllocateResponse()
        for i in range(responses):
            resp.container_responses.add().envs["N"] = str(i)
        return resp

    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2), allocate=allocate)
        async with serving(plugin):
            await registered(m, plugin)
            pod, c = one("pod-1", 1)
            if responses == 0:
                with pytest.raises(AdmissionError, match=r"^no containers return in allocation response"):
                    await m.allocate(pod, c)
                assert m.get_devices("pod-1", "c") is None
                # The picked device was given back.
                plugin.allocate_handler = default_allocate
                await m.allocate(*one("pod-2", 2))
            else:
                await m.allocate(pod, c)
                opts = await m.get_device_run_container_options(pod, c)
                assert opts is not None and opts.envs == [("N", "0")]


async def test_preferred_allocation_is_asked_and_honoured(root: Path) -> None:
    async def preferred(request: dp.PreferredAllocationRequest) -> dp.PreferredAllocationResponse:
        creq = request.container_requests[0]
        pick = sorted(creq.available_deviceIDs, reverse=True)[: creq.allocation_size]
        return dp.PreferredAllocationResponse(
            container_responses=[dp.ContainerPreferredAllocationResponse(deviceIDs=pick)]
        )

    async with running_manager(root) as m:
        plugin = FakePlugin(
            m.plugin_dir / "p.sock",
            R,
            make_devices(4),
            options=dp.DevicePluginOptions(get_preferred_allocation_available=True),
            preferred=preferred,
        )
        async with serving(plugin):
            await registered(m, plugin)
            await m.allocate(*one("pod-1", 2))
            assert held(m, "pod-1", "c") == {"dev3", "dev2"}
            [req] = plugin.preferred_calls
            assert sorted(req.available_deviceIDs) == ["dev0", "dev1", "dev2", "dev3"]
            assert list(req.must_include_deviceIDs) == [] and req.allocation_size == 2


async def test_preferred_allocation_outside_the_candidates_is_ignored(root: Path) -> None:
    async def preferred(request: dp.PreferredAllocationRequest) -> dp.PreferredAllocationResponse:
        return dp.PreferredAllocationResponse(
            container_responses=[dp.ContainerPreferredAllocationResponse(deviceIDs=["nope", "dev1"])]
        )

    async with running_manager(root) as m:
        plugin = FakePlugin(
            m.plugin_dir / "p.sock",
            R,
            make_devices(3),
            options=dp.DevicePluginOptions(get_preferred_allocation_available=True),
            preferred=preferred,
        )
        async with serving(plugin):
            await registered(m, plugin)
            await m.allocate(*one("pod-1", 2))
            mine = held(m, "pod-1", "c")
            assert "dev1" in mine and "nope" not in mine and len(mine) == 2


async def test_init_container_devices_are_reused(root: Path) -> None:
    """TestInitContainerDeviceAllocation: init devices go to later containers; app devices are exclusive."""
    init1 = Container("init1", {R: 2})
    init2 = Container("init2", {R: 1})
    app1 = Container("app1", {R: 1})
    app2 = Container("app2", {R: 1})
    pod = Pod("pod-1", init_containers=[init1, init2], containers=[app1, app2])
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(4))
        async with serving(plugin):
            await registered(m, plugin)
            for c in [init1, init2, app1, app2]:
                await m.allocate(pod, c)
            d_init1, d_init2 = held(m, "pod-1", "init1"), held(m, "pod-1", "init2")
            d_app1, d_app2 = held(m, "pod-1", "app1"), held(m, "pod-1", "app2")
            assert len(d_init1) == 2 and d_init2 <= d_init1
            assert d_app1 | d_app2 == d_init1 and not d_app1 & d_app2


async def test_sidecar_devices_are_exclusive(root: Path) -> None:
    """TestRestartableInitContainerDeviceAllocation: a sidecar keeps its devices for the pod's life."""
    init1 = Container("init1", {R: 2})
    sidecar = Container("sidecar", {R: 1}, restart_policy="Always")
    app = Container("app", {R: 2})
    pod = Pod("pod-1", init_containers=[init1, sidecar], containers=[app])
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(4))
        async with serving(plugin):
            await registered(m, plugin)
            for c in [init1, sidecar, app]:
                await m.allocate(pod, c)
            d_init1, d_side, d_app = (held(m, "pod-1", n) for n in ("init1", "sidecar", "app"))
            assert d_side <= d_init1 and not d_side & d_app
            assert len(d_app) == 2 and len(d_side | d_app) == 3


async def test_numa_affinity_is_honoured(root: Path) -> None:
    devices = [device(f"n0-{i}", numa=[0]) for i in range(2)] + [
        device(f"n1-{i}", numa=[1]) for i in range(3)
    ]
    store = HintStore()  # what the topology manager chose, read back while devices are picked
    store.set_hint("pod-1", "c", TopologyHint.of((1,), True))
    async with running_manager(root, affinity=store) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, devices)
        async with serving(plugin):
            await registered(m, plugin)
            c = Container("c", {R: 2})
            await m.allocate(Pod("pod-1", containers=[c]), c)
            assert held(m, "pod-1", "c") <= {"n1-0", "n1-1", "n1-2"}
            assert set(m.get_devices("pod-1", "c")[R].values()) == {(1,)}  # type: ignore[index]
            hints = m.get_topology_hints(Pod("pod-2", containers=[c]), c)
            # Node 1 has one free device left: node 0 alone fits, and is the narrowest.
            assert hints == {
                R: [
                    TopologyHint.of((0,), True),
                    TopologyHint.of(
                        (
                            0,
                            1,
                        ),
                        False,
                    ),
                ]
            }
            hints = m.get_topology_hints(Pod("pod-1", containers=[c]), c)  # already allocated: regenerate
            assert hints[R] == [
                TopologyHint.of((1,), True),
                TopologyHint.of(
                    (
                        0,
                        1,
                    ),
                    False,
                ),
            ]
            big = Container("big", {R: 4})
            assert m.get_topology_hints(Pod("pod-3", containers=[big]), big) == {R: []}


async def test_hints_without_topology_are_no_preference(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2))
        async with serving(plugin):
            await registered(m, plugin)
            pod, c = one("pod-1", 1)
            assert m.get_topology_hints(pod, c) == {R: None}


async def test_hung_plugin_fails_only_its_own_allocation(root: Path) -> None:
    called = asyncio.Event()

    async def hang(request: dp.AllocateRequest) -> dp.AllocateResponse:
        called.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with running_manager(root, allocate_timeout=2.0) as m:
        hung = FakePlugin(m.plugin_dir / "h.sock", R, make_devices(2), allocate=hang)
        good = FakePlugin(m.plugin_dir / "g.sock", R2, make_devices(2))
        async with serving(hung, good):
            await registered(m, hung)
            await registered(m, good)
            stuck = asyncio.create_task(m.allocate(*one("pod-1", 1)))
            await called.wait()
            await m.allocate(*one("pod-2", 1, R2))
            assert not stuck.done(), "the good allocation waited for the hung plugin"
            assert held(m, "pod-2", "c", R2)
            with pytest.raises(AdmissionError) as err:
                await stuck
            assert (
                str(err.value)
                == f"device plugin Allocate rpc for {R} failed with err: deadline of 2 s exceeded"
            )
            assert m.get_devices("pod-1", "c") is None
            assert m.registered_resources()[0].allocated == 0


async def test_run_options_merge_prestart_and_reallocation(root: Path) -> None:
    async def allocate(request: dp.AllocateRequest) -> dp.AllocateResponse:
        ids = list(request.container_requests[0].devices_ids)
        c = dp.ContainerAllocateResponse(
            envs={"SHARED": ids[0], f"ONLY_{ids[0].upper()}": "1"},
            mounts=[dp.Mount(container_path="/shared", host_path=f"/host/{ids[0]}", read_only=True)],
            devices=[
                dp.DeviceSpec(container_path=f"/dev/{i}", host_path=f"/dev/{i}", permissions="rw")
                for i in ids
            ],
            annotations={"a": ids[0]},
            cdi_devices=[dp.CDIDevice(name="vendor.com/x=all")],
        )
        return dp.AllocateResponse(container_responses=[c])

    async with running_manager(root) as m:
        a = FakePlugin(
            m.plugin_dir / "a.sock",
            R,
            [device("a0")],
            options=dp.DevicePluginOptions(pre_start_required=True),
            allocate=allocate,
        )
        b = FakePlugin(m.plugin_dir / "b.sock", R2, [device("b0")], allocate=allocate)
        async with serving(a, b):
            await registered(m, a)
            await registered(m, b)
            c = Container("c", {R: 1, R2: 1})
            pod = Pod("pod-1", containers=[c])
            # Nothing cached and PreStart required: the kubelet fails before re-allocating.
            with pytest.raises(RunOptionsError) as err:
                await m.get_device_run_container_options(pod, c)
            assert str(err.value) == (
                f"no devices found allocated in local cache for pod pod-1, container c, resource {R}"
            )
            await m.allocate(pod, c)
            opts = await m.get_device_run_container_options(pod, c)
            assert opts is not None
            assert a.prestart_calls == [["a0"]]
            # Resources in sorted order, first writer wins.
            assert opts.envs == [("ONLY_A0", "1"), ("SHARED", "a0"), ("ONLY_B0", "1")]
            assert [(x.container_path, x.host_path) for x in opts.mounts] == [("/shared", "/host/a0")]
            assert [x.path_in_container for x in opts.devices] == ["/dev/a0", "/dev/b0"]
            assert opts.annotations == [("a", "a0")]
            assert opts.cdi_devices == ["vendor.com/x=all"]
            a.prestart_error = "device is on fire"
            with pytest.raises(RunOptionsError) as err:
                await m.get_device_run_container_options(pod, c)
            assert str(err.value).startswith(f"device plugin PreStartContainer rpc for {R} failed with err:")
            assert "device is on fire" in str(err.value)
            # A container with a cache miss and no PreStart is re-allocated on start.
            d = Container("d", {R2: 0})
            assert await m.get_device_run_container_options(pod, d) is None
            b.devices.append(device("b1"))
            b.set_devices(b.devices)
            await eventually(lambda: m.get_capacity()[1].get(R2) == 2)
            e = Container("e", {R2: 1})
            opts = await m.get_device_run_container_options(Pod("pod-1", containers=[c, e]), e)
            assert opts is not None and opts.envs[0] == ("ONLY_B1", "1")


async def test_gc_releases_pods_that_are_gone(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2))
        async with serving(plugin):
            await registered(m, plugin)
            await m.allocate(*one("pod-1", 1))
            await m.allocate(*one("pod-2", 1))
            with pytest.raises(AdmissionError):
                await m.allocate(*one("pod-3", 1))
            m.sources_ready = False
            assert m.update_allocated_devices(["pod-1"]) == []
            m.sources_ready = True
            assert m.update_allocated_devices(["pod-1"]) == ["pod-2"]
            assert m.get_devices("pod-2", "c") is None and m.pod_uids() == {"pod-1"}
            await m.allocate(*one("pod-3", 1))


async def test_gc_runs_on_allocation_through_the_active_pods_callback(root: Path) -> None:
    active = {"pod-1", "pod-2"}
    async with running_manager(root, active_pods=lambda: active) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(1))
        async with serving(plugin):
            await registered(m, plugin)
            await m.allocate(*one("pod-1", 1))
            active.discard("pod-1")
            await m.allocate(*one("pod-2", 1))  # pod-1's device is reclaimed first
            assert m.pod_uids() == {"pod-2"}


async def test_allocated_resources_status(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2))
        async with serving(plugin):
            await registered(m, plugin)
            await m.allocate(*one("pod-1", 2))
            assert m.allocated_resources_status("pod-1", "c") == {R: {"dev0": "Healthy", "dev1": "Healthy"}}
            changes = []
            m.subscribe(changes.append)
            plugin.set_devices([device("dev0"), device("dev1", "Unhealthy")])
            await eventually(lambda: m.get_capacity()[1] == {R: 1})
            assert m.allocated_resources_status("pod-1", "c") == {R: {"dev0": "Healthy", "dev1": "Unhealthy"}}
            assert any(ch.kind == "devices" and ch.pod_uids == ("pod-1",) for ch in changes)
        await eventually(lambda: m.registered_resources()[0].state == "stopped")
        assert m.allocated_resources_status("pod-1", "c") == {R: {"dev0": "Unknown", "dev1": "Unknown"}}


async def test_checkpoint_write_failure_fails_admission(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(2))
        async with serving(plugin):
            await registered(m, plugin)
            blocker = m.plugin_dir / "kubelet_internal_checkpoint"
            # The write the plugin's first snapshot asked for runs in the background: let it land first.
            await eventually(blocker.exists, what="the checkpoint written after registration")
            blocker.unlink()
            blocker.mkdir()
            (blocker / "keep").write_text("x")
            with pytest.raises(AdmissionError, match="kubelet_internal_checkpoint"):
                await m.allocate(*one("pod-1", 1))


async def test_containers_of_one_pod_admitted_concurrently_are_serialised(root: Path) -> None:
    init = Container("init", {R: 2})
    app1 = Container("app1", {R: 1})
    app2 = Container("app2", {R: 1})
    pod = Pod("pod-1", init_containers=[init], containers=[app1, app2])
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(4))
        async with serving(plugin):
            await registered(m, plugin)
            await asyncio.gather(*(m.allocate(pod, c) for c in (init, app1, app2)))
            d_init, d_app1, d_app2 = (held(m, "pod-1", n) for n in ("init", "app1", "app2"))
            assert d_app1 | d_app2 == d_init and not d_app1 & d_app2
            assert m.allocated_device_counts() == {R: 2}


async def test_concurrent_pods_never_share_a_device(root: Path) -> None:
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(20))
        async with serving(plugin):
            await registered(m, plugin)
            results = await asyncio.gather(
                *(m.allocate(*one(f"pod-{i}", 1)) for i in range(25)), return_exceptions=True
            )
            refused = [r for r in results if isinstance(r, AdmissionError)]
            assert len(refused) == 5 and all("Available: 0" in str(r) for r in refused)
            everyone = [held(m, f"pod-{i}", "c") for i in range(25) if m.get_devices(f"pod-{i}", "c")]
            assert len(everyone) == 20 and len(set().union(*everyone)) == 20


async def test_should_reset_extended_resource_capacity(root: Path) -> None:
    m = DeviceManager(root / "dp")
    (root / "dp").mkdir()
    (root / "dp" / ".hidden").write_text("")
    assert await m.should_reset_extended_resource_capacity()
    await m.start()
    try:
        assert not await m.should_reset_extended_resource_capacity()
    finally:
        await m.stop()
