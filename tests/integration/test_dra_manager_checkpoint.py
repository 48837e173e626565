"""The DRA manager's checkpoint against its claim-info cache, with a raw DRA plugin over real unix sockets:
the file equals the cache after every successful call (SPEC §13.2.6 step 4: every successful unprepare
writes it), and no pod is reported free of its claims while the file on disk still lists it."""

from __future__ import annotations

import threading

import pytest

from kubedevice.checkpoint import ClaimInfoState, DRADevice
from kubedevice.dra import UnprepareError
from tests.dra_manager_env import DRAManagerEnv, allocated, dra_manager_env, gpu, pod
from tests.dra_plugin import UNPREPARE, Device
from tests.waiting import DEADLINE_S, poll_async

GPU = "gpu.example.com"
NIC = "nic.example.com"


def cache_states(env: DRAManagerEnv) -> tuple[ClaimInfoState, ...]:
    return tuple(state for state, _prepared in env.manager.claim_infos())


async def test_a_no_op_unprepare_writes_what_a_failed_one_left_in_memory() -> None:
    async with dra_manager_env(reconcile_period=3600) as env:
        gpus = await env.start_plugin(GPU)
        nics = await env.start_plugin(NIC)
        a, b = pod("A", "c1", "c2"), pod("B", "c1")
        env.claims.put(allocated("c1", "u1", [a, b], ("gpu", GPU, "gpu-0")))
        env.claims.put(allocated("c2", "u2", [a], ("nic", NIC, "eth0")))
        gpus.set_devices("u1", gpu("gpu-0"))
        nics.set_devices("u2", Device("node-1", "eth0", ("nic",), (f"{NIC}/nic=eth0",)))
        await env.manager.prepare_resources(a)
        await env.manager.prepare_resources(b)

        await nics.stop()
        await poll_async(
            lambda: not any(d.endpoints for d in env.manager.drivers() if d.name == NIC),
            "the NIC driver's deregistration",
        )
        # A leaves the shared c1 in memory; c2 is its alone and its driver is away: the call fails and,
        # as the kubelet's, writes nothing.
        with pytest.raises(UnprepareError, match=f"DRA driver {NIC} is not registered"):
            await env.manager.unprepare_resources(a)
        assert env.checkpoint_claims()["default/c1"][0] == {"A", "B"}

        # X names c1 but was never recorded on it: a successful unprepare that changes nothing.
        assert await env.manager.unprepare_resources(pod("X", "c1")) == []
        assert gpus.calls_of(UNPREPARE) == []
        # §13.2.6 step 4: the successful call ended with a write of the whole cache.
        expected = (
            ClaimInfoState(
                "u1",
                "c1",
                "default",
                frozenset({"B"}),
                {GPU: (DRADevice("node-1", "gpu-0", ("gpu",), (f"{GPU}/gpu=gpu-0",)),)},
            ),
            ClaimInfoState(
                "u2",
                "c2",
                "default",
                frozenset({"A"}),
                {NIC: (DRADevice("node-1", "eth0", ("nic",), (f"{NIC}/nic=eth0",)),)},
            ),
        )
        assert env.checkpoint().claims == expected
        assert cache_states(env) == expected


class HeldWrites:
    """A checkpoint fault hook that, once armed, holds each write after its fsync (before the rename, so
    the file still has the old content) until `release`. It runs in the writer's thread."""

    def __init__(self) -> None:
        self.armed = False
        self.held = threading.Event()
        self._released = threading.Event()

    def __call__(self, stage: str) -> None:
        if self.armed and stage == "after-fsync":
            self.held.set()
            if not self._released.wait(DEADLINE_S):
                raise AssertionError("a checkpoint write was held past the deadline")

    def release(self) -> None:
        self._released.set()


async def test_a_pod_is_referenced_until_the_write_of_its_removal_ends() -> None:
    gate = HeldWrites()
    try:
        async with dra_manager_env(reconcile_period=3600, checkpoint_fault=gate) as env:
            plugin = await env.start_plugin(GPU)
            p = pod("P", "c1")
            env.claims.put(allocated("c1", "u1", [p], ("gpu", GPU, "gpu-0")))
            await env.manager.prepare_resources(p)
            gate.armed = True
            env.manager.sources_ready = True  # P is not active: the reconcile pass unprepares c1
            await poll_async(gate.held.is_set, "the reconcile pass's checkpoint write")
            assert len(plugin.calls_of(UNPREPARE)) == 1
            # The entry is gone from memory, not yet from the file: P must not be forgotten yet.
            assert cache_states(env) == ()
            assert env.checkpoint_claims()["default/c1"][0] == {"P"}
            assert env.manager.pod_might_need_to_unprepare_resources("P")
            gate.release()
            await poll_async(
                lambda: not env.manager.pod_might_need_to_unprepare_resources("P"), "the write's end"
            )
            assert env.checkpoint().claims == ()
    finally:
        gate.release()
