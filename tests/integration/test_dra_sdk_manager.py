"""The SDK's DRA face against the node side's DRA manager, over the real sockets of one kubelet folder.

A `DevicePlugin` with a `driver_name` is served by the SDK (FacesServer, as `serve(api="dra")` runs it)
in the folder of a `DRAManager` whose `plugin_handler` a real plugins_registry watcher feeds. Claims live
in one dictionary: the manager reads them as its ClaimSource, the SDK through its backend (the standalone
backend's part played in the test, as the node daemon's `GET /claims` would answer).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from kubedevice.dra import DRAPod, PrepareError, ResourceClaim
from kubedevice.plugin import Device
from kubedevice.plugin.dra.backend_api import ClaimFetchError, PublishedDevice
from kubedevice.plugin.dra.runner import FacesServer
from tests.dra_kubelet import DRIVER
from tests.dra_manager_env import DictClaims, DRAManagerEnv, allocated, dra_manager_env, pod
from tests.integration.dra_plugins import Gpus, HookedGpus, paths_of, running
from tests.waiting import poll_async


def claim_json(claim: ResourceClaim) -> dict[str, Any]:
    """The resource.k8s.io/v1 JSON of a claim, as the API server (or the node daemon) serves it."""
    results = [
        {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        for r in (claim.allocation.results if claim.allocation else ())
    ]
    status = {"allocation": {"devices": {"results": results, "config": []}}} if claim.allocation else {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim.name, "namespace": claim.namespace, "uid": claim.uid},
        "status": status,
    }


class SharedClaims:
    """The SDK's backend over the manager's claim dictionary; every publish() recorded."""

    def __init__(self, claims: DictClaims) -> None:
        self.node_name = "node-1"
        self._claims = claims
        self.published: list[list[PublishedDevice]] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        claim = self._claims.claims.get((namespace, name))
        if claim is None:
            raise ClaimFetchError(f'resourceclaims.resource.k8s.io "{name}" not found')
        return claim_json(claim)

    async def publish(self, devices: Sequence[PublishedDevice], counter_sets: Sequence[object] = ()) -> None:
        self.published.append(list(devices))


@asynccontextmanager
async def sdk_driver(
    env: DRAManagerEnv, plugin: Gpus, backend: SharedClaims, **options: Any
) -> AsyncIterator[FacesServer]:
    """The plugin served in the manager's folder; returns once the manager has a connected endpoint of it."""
    uid = options.get("rolling_update_uid", "")
    resend = {"health_resend_interval": 0.2}
    async with running(plugin, env.root, backend, dra_options=resend, **options) as s:
        endpoint = str(paths_of(env.root, uid).dra_socket)
        await poll_async(lambda: connected(env, endpoint), f"the manager connected to {endpoint}")
        yield s


def connected(env: DRAManagerEnv, endpoint: str) -> bool:
    return any(e.endpoint == endpoint and e.connected for d in env.manager.drivers() for e in d.endpoints)


def cdi_ids(env: DRAManagerEnv, p: DRAPod) -> list[str]:
    container = p.containers[0]
    return env.manager.get_resources(p, container)


def state_claims(env: DRAManagerEnv) -> set[str]:
    state = json.loads(paths_of(env.root).state_file.read_text())
    return set(state["claims"])


def spec_file(root: Path, uid: str) -> Path:
    return root / "cdi" / f"kubedevice-{DRIVER}-{uid}.json"


async def test_register_publish_prepare_and_unprepare() -> None:
    async with dra_manager_env(call_timeout=5) as env:
        backend, plugin = SharedClaims(env.claims), Gpus()
        async with sdk_driver(env, plugin, backend) as server:
            (driver,) = env.manager.drivers()
            assert driver.name == DRIVER
            (endpoint,) = driver.endpoints
            assert (endpoint.service, endpoint.health_service) == ("v1.DRAPlugin", "v1.DRAResourceHealth")
            await poll_async(lambda: server.dra is not None and server.dra.registrations == 1, "registered")
            await poll_async(lambda: backend.published, "published")
            assert [d.id for d in backend.published[-1]] == ["gpu-0", "gpu-1"]

            p1 = pod("P1", "c1")
            env.claims.put(allocated("c1", "u1", [p1], ("gpu", DRIVER, "gpu-0")))
            env.active.add(p1.uid)
            prepared = await env.manager.prepare_resources(p1)
            assert [r.name for r in prepared] == ["c1"]
            assert cdi_ids(env, p1) == ["gpu.example.com/gpu=gpu-0", "gpu.example.com/claim=u1-gpu"]
            assert env.checkpoint_claims() == {"default/c1": ({"P1"}, {DRIVER: ["gpu-0"]})}
            assert json.loads(spec_file(env.root, "u1").read_text())["devices"][0]["name"] == "u1-gpu"
            assert state_claims(env) == {"u1"}
            assert await env.manager.prepare_resources(p1) == []  # prepared: no second call
            assert plugin.allocations == [["gpu-0"]]

            unprepared = await env.manager.unprepare_resources(p1)
            assert [r.name for r in unprepared] == ["c1"]
            assert state_claims(env) == set()
            assert not spec_file(env.root, "u1").exists()
            assert env.manager.claim_infos() == []


async def test_plugin_restart_keeps_its_answers_and_unprepares_what_the_old_instance_prepared() -> None:
    async with dra_manager_env(call_timeout=5) as env:
        backend = SharedClaims(env.claims)
        p1 = pod("P1", "c1")
        env.claims.put(allocated("c1", "u1", [p1], ("gpu", DRIVER, "gpu-1")))
        first_plugin = HookedGpus()
        async with sdk_driver(env, first_plugin, backend):
            await env.manager.prepare_resources(p1)
            before = cdi_ids(env, p1)
        assert before == ["gpu.example.com/gpu=gpu-1"]
        second_plugin = HookedGpus()
        async with sdk_driver(env, second_plugin, backend):
            # The manager's restart forgets that c1 is prepared: it asks the new plugin instance again.
            await env.restart_manager(call_timeout=5)
            await poll_async(lambda: connected(env, str(paths_of(env.root).dra_socket)), "registered again")
            assert [r.name for r in await env.manager.prepare_resources(p1)] == ["c1"]
            assert cdi_ids(env, p1) == before
            assert [c.uid for c in first_plugin.prepared] == ["u1"]
            assert second_plugin.prepared == []  # answered from the state file
            await env.manager.unprepare_resources(p1)
            assert [c.uid for c in second_plugin.unprepared] == ["u1"]
            assert state_claims(env) == set()


async def test_manager_restart_registers_the_driver_again_and_gets_the_same_answer() -> None:
    async with dra_manager_env(call_timeout=5) as env:
        backend, plugin = SharedClaims(env.claims), Gpus()
        p1 = pod("P1", "c1")
        env.claims.put(allocated("c1", "u1", [p1], ("gpu", DRIVER, "gpu-0")))
        async with sdk_driver(env, plugin, backend) as server:
            await env.manager.prepare_resources(p1)
            before = cdi_ids(env, p1)
            await poll_async(lambda: server.dra is not None and server.dra.registrations == 1, "registered")
            await env.restart_manager(call_timeout=5)
            assert env.checkpoint_claims() == {"default/c1": ({"P1"}, {DRIVER: ["gpu-0"]})}
            await poll_async(lambda: server.dra is not None and server.dra.registrations == 2, "again")
            await poll_async(lambda: connected(env, str(paths_of(env.root).dra_socket)), "connected")
            assert [r.name for r in await env.manager.prepare_resources(p1)] == ["c1"]
            assert cdi_ids(env, p1) == before
            assert plugin.allocations == [["gpu-0"]]


async def test_rolling_update_from_a_to_b() -> None:
    """A serves; B starts beside it and takes the calls; A stops; B unprepares what A prepared."""
    async with dra_manager_env(call_timeout=5) as env:
        backend = SharedClaims(env.claims)
        a, b = HookedGpus(), HookedGpus()
        p1, p2 = pod("P1", "c1"), pod("P2", "c2")
        env.claims.put(allocated("c1", "u1", [p1], ("gpu", DRIVER, "gpu-0")))
        env.claims.put(allocated("c2", "u2", [p2], ("gpu", DRIVER, "gpu-1")))
        a_socket, b_socket = (str(paths_of(env.root, uid).dra_socket) for uid in "AB")

        def endpoints() -> list[str]:
            return [e.endpoint for d in env.manager.drivers() for e in d.endpoints]

        async with AsyncExitStack() as b_stack:
            async with sdk_driver(env, a, backend, rolling_update_uid="A"):
                await env.manager.prepare_resources(p1)
                await b_stack.enter_async_context(sdk_driver(env, b, backend, rolling_update_uid="B"))
                assert endpoints() == [a_socket, b_socket]
            await poll_async(lambda: endpoints() == [b_socket], "A deregistered, B left")
            await env.manager.prepare_resources(p2)
            assert cdi_ids(env, p2) == ["gpu.example.com/gpu=gpu-1"]
            await env.manager.unprepare_resources(p1)
            assert ([c.uid for c in a.prepared], [c.uid for c in b.prepared]) == (["u1"], ["u2"])
            assert [c.uid for c in b.unprepared] == ["u1"]
            assert state_claims(env) == {"u2"}


async def test_health_flips_reach_the_manager() -> None:
    async with dra_manager_env(call_timeout=5) as env:
        plugin = Gpus()
        async with sdk_driver(env, plugin, SharedClaims(env.claims)):

            def health() -> dict[str, str]:
                return {d: h.health for (_, d), h in env.manager.device_health(DRIVER).items()}

            await poll_async(lambda: health() == {"gpu-0": "Healthy", "gpu-1": "Healthy"}, "both healthy")
            plugin.set_devices([Device("gpu-0"), Device("gpu-1", healthy=False)])
            await poll_async(lambda: health().get("gpu-1") == "Unhealthy", "gpu-1 unhealthy")
            assert health()["gpu-0"] == "Healthy"
            assert set(env.manager.device_health(DRIVER)) == {("node-1", "gpu-0"), ("node-1", "gpu-1")}
            plugin.set_devices([Device("gpu-0"), Device("gpu-1")])
            await poll_async(lambda: health().get("gpu-1") == "Healthy", "gpu-1 healthy again")


async def test_a_hook_that_fails_one_claim_of_three_fails_that_claim_alone() -> None:
    async with dra_manager_env(call_timeout=5) as env:
        plugin = HookedGpus(failing=["u2"])
        p1 = pod("P1", "c1", "c2", "c3")
        for number, device in ((1, "gpu-0"), (2, "gpu-1"), (3, "gpu-0")):
            env.claims.put(allocated(f"c{number}", f"u{number}", [p1], ("gpu", DRIVER, device)))
        async with sdk_driver(env, plugin, SharedClaims(env.claims)):
            with pytest.raises(PrepareError) as failed:
                await env.manager.prepare_resources(p1)
            assert str(failed.value) == (
                "prepare dynamic resources: NodePrepareResources failed for ResourceClaim c2: GPU busy"
            )
            assert sorted(c.uid for c in plugin.prepared) == ["u1", "u2", "u3"]
            assert state_claims(env) == {"u1", "u3"}  # the others were prepared, and stay so
            plugin.failing.clear()
            await env.manager.prepare_resources(p1)  # the kubelet tries the pod again
            assert sorted(c.uid for c in plugin.prepared) == ["u1", "u2", "u2", "u3"]
            assert state_claims(env) == {"u1", "u2", "u3"}
