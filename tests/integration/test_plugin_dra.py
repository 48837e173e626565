"""The SDK's DRA face against a kubelet played by a plain grpc.aio client over the real sockets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest
from asyncinotify import Inotify, Mask

from kubedevice.api.drahealth.v1 import api_pb2 as health_v1
from kubedevice.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from kubedevice.api.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from kubedevice.api.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from kubedevice.plugin import Allocation, Device, DeviceSpec, Mount
from kubedevice.plugin.dra.state import StateFileError
from kubedevice.plugin.events import EventKind, LifecycleEvent
from tests.dra_kubelet import (
    DRIVER,
    MemoryBackend,
    get_info,
    health_messages,
    make_claim,
    next_matching,
    notify,
    prepare,
    register,
    unprepare,
)
from tests.integration.dra_plugins import Gpus, HookedGpus, kubelet_dir, paths_of, running
from tests.waiting import poll_async

__all__ = ["kubelet_dir"]

C1 = make_claim("c1", "u1", [("gpu", "gpu-0")])


def spec_file(kubelet_dir: Path, uid: str) -> Path:
    return kubelet_dir / "cdi" / f"kubedevice-{DRIVER}-{uid}.json"


async def test_registration_get_info_and_verdicts(kubelet_dir: Path) -> None:
    backend, events = MemoryBackend(), list[LifecycleEvent]()
    async with running(Gpus(), kubelet_dir, backend, events=events) as server:
        paths = paths_of(kubelet_dir)
        assert paths.registration_socket == kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock"
        info = await get_info(paths.registration_socket)
        assert (info.type, info.name, info.endpoint) == (
            "DRAPlugin",
            DRIVER,
            str(kubelet_dir / "plugins" / DRIVER / "dra.sock"),
        )
        assert list(info.supported_versions) == [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1.DRAResourceHealth",
            "v1alpha1.DRAResourceHealth",
        ]
        published_before = len(backend.published)
        await notify(paths.registration_socket)
        await poll_async(lambda: len(backend.published) > published_before, "publish at registration")
        assert backend.published_ids() == ["gpu-0", "gpu-1"]
        assert any(e.kind is EventKind.REGISTERED for e in events)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await notify(paths.registration_socket, registered=False, error="boom")
        assert refused.value.code() is grpc.StatusCode.UNKNOWN
        assert refused.value.details() == "failed registration process: boom"
        assert server.dra is not None and server.dra.registrations == 1


async def test_prepare_is_idempotent_and_recreates_the_cdi_spec(kubelet_dir: Path) -> None:
    """Scenario 27: the same prepare twice, then with the CDI spec deleted: one allocate call."""
    backend, plugin = MemoryBackend(), Gpus()
    backend.add(C1)
    events: list[LifecycleEvent] = []
    async with running(plugin, kubelet_dir, backend, events=events):
        dra = paths_of(kubelet_dir).dra_socket
        first = await prepare(dra, [("u1", "c1")])
        expected_ids = ["gpu.example.com/gpu=gpu-0", "gpu.example.com/claim=u1-gpu"]
        assert first == {
            "u1": {
                "error": "",
                "devices": [
                    {
                        "request_names": ["gpu"],
                        "pool_name": "node-1",
                        "device_name": "gpu-0",
                        "cdi_device_ids": expected_ids,
                    }
                ],
            }
        }
        spec = json.loads(spec_file(kubelet_dir, "u1").read_text())
        assert spec["kind"] == "gpu.example.com/claim" and spec["cdiVersion"] == "0.6.0"
        assert spec["devices"] == [{"name": "u1-gpu", "containerEdits": {"env": ["GPUS=gpu-0"]}}]
        assert await prepare(dra, [("u1", "c1")]) == first
        assert await prepare(dra, [("u1", "c1")], version="v1beta1") == first
        spec_file(kubelet_dir, "u1").unlink()
        assert await prepare(dra, [("u1", "c1")]) == first
        assert json.loads(spec_file(kubelet_dir, "u1").read_text()) == spec
        assert plugin.allocations == [["gpu-0"]]
        state = json.loads(paths_of(kubelet_dir).state_file.read_text())
        assert state["version"] == 1 and set(state["claims"]) == {"u1"}
        assert state["claims"]["u1"]["devices"] == first["u1"]["devices"]
        kinds = [e.kind for e in events if e.kind in (EventKind.PREPARE, EventKind.PREPARE_CACHED)]
        assert kinds == [EventKind.PREPARE] + [EventKind.PREPARE_CACHED] * 3
        assert events[[e.kind for e in events].index(EventKind.PREPARE)].fields == {
            "claim": "default/c1",
            "uid": "u1",
        }


async def test_unprepare_of_unknown_claim_succeeds_without_the_hook(kubelet_dir: Path) -> None:
    """Scenario 28."""
    plugin = HookedGpus()
    async with running(plugin, kubelet_dir, MemoryBackend()):
        assert await unprepare(paths_of(kubelet_dir).dra_socket, [("never", "x")]) == {"never": ""}
        assert plugin.unprepared == []


async def test_a_failing_claim_fails_alone(kubelet_dir: Path) -> None:
    """Scenario 29: the hook raises for u2 only."""
    backend, plugin = MemoryBackend(), HookedGpus(failing=["u2"])
    backend.add(C1)
    backend.add(make_claim("c2", "u2", [("gpu", "gpu-1")]))
    async with running(plugin, kubelet_dir, backend):
        answer = await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1"), ("u2", "c2")])
        assert set(answer) == {"u1", "u2"}
        assert answer["u2"] == {"error": "GPU busy", "devices": []}
        assert answer["u1"]["devices"][0]["cdi_device_ids"] == ["gpu.example.com/gpu=gpu-0"]
        state = json.loads(paths_of(kubelet_dir).state_file.read_text())
        assert set(state["claims"]) == {"u1"}


async def test_a_result_in_another_pool_fails_that_claim_alone(kubelet_dir: Path) -> None:
    """A device is its driver, pool and name: gpu-1 of another node's pool is not this driver's gpu-1, for
    its own hook as for the default prepare; the claim's error names all three and the pool it has."""
    backend = MemoryBackend(node_name="node-1")
    backend.add(C1)
    backend.add(make_claim("elsewhere", "u6", [("gpu", "gpu-1")], pool="node-2"))
    for plugin in (HookedGpus(), Gpus()):
        async with running(plugin, kubelet_dir, backend):
            answer = await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1"), ("u6", "elsewhere")])
            assert answer["u6"] == {
                "error": "claim default/elsewhere: device gpu-1 of pool node-2 is not one of "
                "gpu.example.com's devices (its pool is node-1)",
                "devices": [],
            }
            assert answer["u1"]["devices"][0]["pool_name"] == "node-1"
            state = json.loads(paths_of(kubelet_dir).state_file.read_text())
            assert set(state["claims"]) == {"u1"}
            assert not spec_file(kubelet_dir, "u6").exists()
        if isinstance(plugin, HookedGpus):
            assert [c.uid for c in plugin.prepared] == ["u1"]
        paths_of(kubelet_dir).state_file.unlink()


async def test_claim_fetch_failures_fail_the_whole_call(kubelet_dir: Path) -> None:
    backend, plugin = MemoryBackend(), HookedGpus()
    backend.add(C1)
    backend.add(make_claim("pending", "u3", [], allocated=False))
    async with running(plugin, kubelet_dir, backend):
        dra = paths_of(kubelet_dir).dra_socket
        cases = {
            ("u1", "c1", "default"): None,
            ("u9", "gone", "default"): (
                "get resource claims: retrieve claim default/gone: "
                'resourceclaims.resource.k8s.io "gone" not found'
            ),
            ("u3", "pending", "default"): "get resource claims: claim default/pending not allocated",
            ("u0", "c1", "default"): "get resource claims: claim default/c1 got replaced",
        }
        for claim, text in cases.items():
            if text is None:
                continue
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await prepare(dra, [("u1", "c1"), claim])
            assert failed.value.code() is grpc.StatusCode.UNKNOWN
            assert failed.value.details() == text
        assert plugin.prepared == []  # fetched first: no hook ran for the good claim either


async def test_only_this_drivers_results_with_sub_requests_cut(kubelet_dir: Path) -> None:
    backend, plugin = MemoryBackend(), HookedGpus()
    config = [
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"sharing": "TimeSlicing"}}},
        {
            "source": "FromClaim",
            "requests": ["nic"],
            "opaque": {"driver": "nic.example.com", "parameters": {}},
        },
    ]
    backend.add(
        make_claim(
            "mixed",
            "u5",
            [("gpu/big", "gpu-1"), ("nic", "eth0", "nic.example.com")],
            config=config,
        )
    )
    async with running(plugin, kubelet_dir, backend):
        answer = await prepare(paths_of(kubelet_dir).dra_socket, [("u5", "mixed")])
        assert answer["u5"]["devices"] == [
            {
                "request_names": ["gpu"],
                "pool_name": "node-1",
                "device_name": "gpu-1",
                "cdi_device_ids": ["gpu.example.com/gpu=gpu-1"],
            }
        ]
        (claim,) = plugin.prepared
        assert [(r.request, r.device, r.device_id) for r in claim.results] == [("gpu/big", "gpu-1", "gpu-1")]
        assert claim.config == (config[0],)


async def test_unprepare_runs_the_hook_and_removes_the_spec_and_entry(kubelet_dir: Path) -> None:
    backend, plugin = MemoryBackend(), Gpus()
    backend.add(C1)
    async with running(plugin, kubelet_dir, backend):
        dra = paths_of(kubelet_dir).dra_socket
        await prepare(dra, [("u1", "c1")])
        assert spec_file(kubelet_dir, "u1").exists()
        assert await unprepare(dra, [("u1", "c1"), ("never", "x")]) == {"u1": "", "never": ""}
        assert not spec_file(kubelet_dir, "u1").exists()
        assert json.loads(paths_of(kubelet_dir).state_file.read_text())["claims"] == {}


async def test_restart_answers_from_the_state_file_and_a_new_boot_runs_the_hook(kubelet_dir: Path) -> None:
    backend = MemoryBackend()
    backend.add(C1)
    first_plugin = Gpus()
    async with running(first_plugin, kubelet_dir, backend):
        first = await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")])
    assert not paths_of(kubelet_dir).dra_socket.exists()  # sockets removed on stop
    second_plugin = Gpus()
    async with running(second_plugin, kubelet_dir, backend):
        assert await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")]) == first
        assert second_plugin.allocations == []
    (kubelet_dir / "boot_id").write_text("another-boot\n")
    third_plugin = Gpus()
    async with running(third_plugin, kubelet_dir, backend):
        assert await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")]) == first
        assert third_plugin.allocations == [["gpu-0"]]
    state = json.loads(paths_of(kubelet_dir).state_file.read_text())
    assert state["claims"]["u1"]["boot_id"] == "another-boot"


async def test_calls_that_wait_meanwhile_share_one_state_write(kubelet_dir: Path) -> None:
    """Group commit: prepares and an unprepare queued behind a running call run one after another and
    their state is written once, before any of them is answered."""
    backend = MemoryBackend()
    for i in range(4):
        backend.add(make_claim(f"c{i}", f"u{i}", [("gpu", f"gpu-{i}")]))
    plugin = Gpus([Device(f"gpu-{i}") for i in range(4)])
    async with running(plugin, kubelet_dir, backend) as server:
        assert server.dra is not None
        paths = paths_of(kubelet_dir)
        assert await prepare(paths.dra_socket, [("u0", "c0")]) != {}
        with Inotify() as inotify:
            inotify.add_watch(paths.state_file.parent, Mask.MOVED_TO)
            inotify.sync_timeout = 0.0
            async with server.dra.preparer.lock.held():  # a call under way
                calls = [
                    asyncio.create_task(prepare(paths.dra_socket, [(f"u{i}", f"c{i}")])) for i in (1, 2, 3)
                ]
                await poll_async(lambda: backend.fetches == 4, "the prepares to fetch their claims and wait")
                calls.append(asyncio.create_task(unprepare(paths.dra_socket, [("u0", "c0")])))
                await poll_async(lambda: server.dra.preparer.queued == 4, "the unprepare to wait")
            answers = await asyncio.gather(*calls)
            writes = [e for e in iter(inotify.sync_get, None) if e.name == Path(paths.state_file.name)]
        assert len(writes) == 1
        assert [a[f"u{i}"]["error"] for i, a in zip((1, 2, 3), answers[:3], strict=True)] == ["", "", ""]
        assert answers[3] == {"u0": ""}
        assert sorted(json.loads(paths.state_file.read_text())["claims"]) == ["u1", "u2", "u3"]
        assert sorted(plugin.allocations) == [["gpu-0"], ["gpu-1"], ["gpu-2"], ["gpu-3"]]


@pytest.mark.parametrize("content", ["{not json", '{"version": 99, "claims": {}}', '{"version": 1}'])
async def test_an_unreadable_state_file_refuses_the_start(kubelet_dir: Path, content: str) -> None:
    state = paths_of(kubelet_dir).state_file
    state.parent.mkdir(parents=True)
    state.write_text(content)
    with pytest.raises(StateFileError) as refused:
        async with running(Gpus(), kubelet_dir, MemoryBackend()):
            pass
    assert str(refused.value).startswith(f"{state}: ")
    assert " — " in str(refused.value)
    assert state.read_text() == content
    assert not paths_of(kubelet_dir).dra_socket.exists()


async def test_health_stream_and_publication_follow_the_devices(kubelet_dir: Path) -> None:
    """Scenario 30 (the plugin's part): gpu-1 turns unhealthy, then goes."""
    backend, plugin = MemoryBackend(), Gpus()
    options = {"health_resend_interval": 0.2}
    async with running(plugin, kubelet_dir, backend, dra_options=options):
        dra = paths_of(kubelet_dir).dra_socket
        stream = health_messages(dra, health_v1, health_v1_grpc)
        old = health_messages(dra, health_v1alpha1, health_v1alpha1_grpc)
        both_healthy = {"gpu-0": "HEALTHY", "gpu-1": "HEALTHY"}
        await next_matching(stream, both_healthy)
        await next_matching(old, both_healthy)
        await next_matching(stream, both_healthy)  # sent again with nothing changed
        plugin.set_devices([Device("gpu-0"), Device("gpu-1", healthy=False)])
        flipped = {"gpu-0": "HEALTHY", "gpu-1": "UNHEALTHY"}
        await next_matching(stream, flipped)
        await next_matching(old, flipped)
        await poll_async(lambda: backend.published_ids() == ["gpu-0"], "gpu-1 left out of the slice")
        plugin.set_devices([Device("gpu-0")])
        await next_matching(stream, {"gpu-0": "HEALTHY", "gpu-1": "UNKNOWN"})
        assert await anext(stream) == {"gpu-0": "HEALTHY"}  # the gone device is sent once
        await stream.aclose()
        await old.aclose()


async def test_registration_socket_is_served_again_when_the_registry_is_recreated(kubelet_dir: Path) -> None:
    backend = MemoryBackend()
    async with running(Gpus(), kubelet_dir, backend) as server:
        socket = paths_of(kubelet_dir).registration_socket
        await register(socket)
        assert server.dra is not None
        await poll_async(lambda: server.dra is not None and server.dra.registrations == 1, "registered")
        socket.unlink()
        (kubelet_dir / "plugins_registry").rmdir()
        (kubelet_dir / "plugins_registry").mkdir()
        await poll_async(socket.exists, "registration socket served again")
        published = len(backend.published)
        info = await register(socket)
        assert info.name == DRIVER
        await poll_async(lambda: len(backend.published) > published, "published again")
        assert server.dra.registrations == 2


async def test_rolling_update_instances_share_state_and_lock(kubelet_dir: Path) -> None:
    """Scenario 31's plugin part: A and B side by side, one state, identical answers."""
    backend = MemoryBackend()
    backend.add(C1)
    a, b = Gpus(), Gpus()
    async with (
        running(a, kubelet_dir, backend, rolling_update_uid="A"),
        running(b, kubelet_dir, backend, rolling_update_uid="B"),
    ):
        registry = kubelet_dir / "plugins_registry"
        assert sorted(p.name for p in registry.iterdir()) == [f"{DRIVER}-A-reg.sock", f"{DRIVER}-B-reg.sock"]
        info_b = await get_info(registry / f"{DRIVER}-B-reg.sock")
        assert info_b.endpoint == str(kubelet_dir / "plugins" / DRIVER / "dra-B.sock")
        first = await prepare(paths_of(kubelet_dir, "A").dra_socket, [("u1", "c1")])
        assert await prepare(paths_of(kubelet_dir, "B").dra_socket, [("u1", "c1")]) == first
        assert (a.allocations, b.allocations) == ([["gpu-0"]], [])
        assert await unprepare(paths_of(kubelet_dir, "B").dra_socket, [("u1", "c1")]) == {"u1": ""}
        assert not spec_file(kubelet_dir, "u1").exists()
        assert (kubelet_dir / "plugins" / DRIVER / "serialize.lock").exists()
    assert sorted(p.name for p in (kubelet_dir / "plugins_registry").iterdir()) == []


class QuietGpus(Gpus):
    dra_health = False


async def test_without_dra_health_no_health_service_is_advertised_or_served(kubelet_dir: Path) -> None:
    async with running(QuietGpus(), kubelet_dir, MemoryBackend()):
        paths = paths_of(kubelet_dir)
        info = await get_info(paths.registration_socket)
        assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        stream = health_messages(paths.dra_socket, health_v1, health_v1_grpc)
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await anext(stream)
        assert missing.value.code() is grpc.StatusCode.UNIMPLEMENTED


async def test_health_streams_end_cleanly_when_the_plugin_stops(kubelet_dir: Path) -> None:
    async with running(Gpus(), kubelet_dir, MemoryBackend()) as server:
        stream = health_messages(paths_of(kubelet_dir).dra_socket, health_v1, health_v1_grpc)
        assert await anext(stream) == {"gpu-0": "HEALTHY", "gpu-1": "HEALTHY"}
        await server.stop()
        with pytest.raises(StopAsyncIteration):  # the stream ends with OK, not a cancelled call
            await anext(stream)


class MountingGpus(Gpus):
    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        self.allocations.append([d.id for d in devices])
        return Allocation(
            envs={"GPUS": ",".join(d.id for d in devices)},
            mounts=[
                Mount(container_path="/opt/gpu/lib", host_path="/usr/lib/gpu", read_only=True),
                Mount("/scratch", "/scratch"),
            ],
            devices=[DeviceSpec(f"/dev/{d.id}", f"/dev/{d.id}", "rw") for d in devices],
            annotations={"gpu.example.com/mode": "fast"},
        )


async def test_default_prepare_writes_one_cdi_device_per_request(
    kubelet_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend, plugin = MemoryBackend(), MountingGpus()
    backend.add(make_claim("two", "u7", [("a", "gpu-0"), ("b/fast", "gpu-1")]))
    async with running(plugin, kubelet_dir, backend):
        answer = await prepare(paths_of(kubelet_dir).dra_socket, [("u7", "two")])
    assert [(d["request_names"], d["cdi_device_ids"]) for d in answer["u7"]["devices"]] == [
        (["a"], ["gpu.example.com/claim=u7-a"]),
        (["b"], ["gpu.example.com/claim=u7-b"]),
    ]
    assert plugin.allocations == [["gpu-0"], ["gpu-1"]]
    spec = json.loads(spec_file(kubelet_dir, "u7").read_text())
    assert spec["devices"][1] == {
        "name": "u7-b",
        "containerEdits": {
            "env": ["GPUS=gpu-1"],
            "deviceNodes": [{"path": "/dev/gpu-1", "hostPath": "/dev/gpu-1", "permissions": "rw"}],
            "mounts": [
                {"hostPath": "/usr/lib/gpu", "containerPath": "/opt/gpu/lib", "options": ["bind", "ro"]},
                {"hostPath": "/scratch", "containerPath": "/scratch", "options": ["bind"]},
            ],
        },
    }
    assert "annotations gpu.example.com/mode dropped (DRA passes CDI devices only)" in caplog.text
