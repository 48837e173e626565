"""The DRA manager's checkpoint against its claim-info cache, with a raw DRA plugin over real unix sockets:
no pod is reported free of its claims while the file on disk still lists it."""

from __future__ import annotations

import threading

from kubedevice.checkpoint import ClaimInfoState
from tests.dra_manager_env import DRAManagerEnv, allocated, dra_manager_env, pod
from tests.dra_plugin import UNPREPARE
from tests.waiting import DEADLINE_S, poll_async

GPU = "gpu.example.com"
NIC = "nic.example.com"


def cache_states(env: DRAManagerEnv) -> tuple[ClaimInfoState, ...]:
    return tuple(state for state, _prepared in env.manager.claim_infos())


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
