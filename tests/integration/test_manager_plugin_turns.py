"""Turns at the plugins: pods admitted concurrently call each plugin one at a time, in turn order, and a
turn passes to the next pod as soon as the pod's last Allocate on that resource is on its way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager import AdmissionError, Container, DeviceManager, Pod
from tests.integration.fakeplugin import (
    FakePlugin,
    default_allocate,
    eventually,
    held,
    make_devices,
    registered,
    running_manager,
    serving,
)

R = "example.com/fake"
R2 = "example.com/other"


class InFlight:
    """Counts the Allocate calls a plugin is answering at once; `gate` holds them until it is set."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def allocate(self, request: dp.AllocateRequest) -> dp.AllocateResponse:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await self.gate.wait()
            await asyncio.sleep(0.002)  # a plugin that takes a while: time for another call to overlap
            return await default_allocate(request)
        finally:
            self.now -= 1


async def admit(m: DeviceManager, pod: Pod, entered: asyncio.Event | None = None) -> None:
    """As the node daemon admits: the turns of every resource the pod needs, then its containers."""
    containers = [*pod.init_containers, *pod.containers]
    async with m.plugin_turns.hold(pod.uid, {r for c in containers for r in c.limits}):
        if entered is not None:
            entered.set()
        for container in containers:
            await m.allocate(pod, container)


@contextlib.asynccontextmanager
async def first_call_held(
    root: Path, first: Callable[[DeviceManager], Awaitable[None]]
) -> AsyncIterator[tuple[DeviceManager, FakePlugin, InFlight, asyncio.Task[None]]]:
    """A manager with a plugin of R whose first Allocate, made by `first`, is held at the plugin."""
    counter = InFlight()
    async with running_manager(root) as m:
        plugin = FakePlugin(m.plugin_dir / "p.sock", R, make_devices(4), allocate=counter.allocate)
        async with serving(plugin):
            await registered(m, plugin)
            counter.gate.clear()
            task = asyncio.create_task(first(m))
            await eventually(lambda: counter.now == 1, what="the first Allocate at the plugin")
            yield m, plugin, counter, task


def one_device_pod(uid: str) -> Pod:
    return Pod(uid, containers=[Container("c", {R: 1})])


async def test_the_next_pod_takes_the_turn_while_the_last_allocate_is_in_flight(root: Path) -> None:
    async with first_call_held(root, lambda m: admit(m, one_device_pod("a"))) as (m, plugin, counter, first):
        entered = asyncio.Event()
        second = asyncio.create_task(admit(m, one_device_pod("b"), entered))
        # Pod a's Allocate is held at the plugin, and pod b has the turn already.
        await asyncio.wait_for(entered.wait(), 10)
        assert not first.done() and len(plugin.allocate_calls) == 1
        counter.gate.set()
        await asyncio.gather(first, second)
    assert counter.most == 1
    a, b = held(m, "a"), held(m, "b")
    assert plugin.allocate_calls == [sorted(a), sorted(b)] and not a & b


async def test_a_pods_calls_stay_together_and_pods_keep_their_order_on_every_plugin(root: Path) -> None:
    counters = {R: InFlight(), R2: InFlight()}
    pods = [
        # Two calls on R: the init container's, then the app container's (one device reused, one more).
        Pod(
            "a",
            init_containers=[Container("init", {R: 1})],
            containers=[Container("app", {R: 2})],
        ),
        Pod("b", containers=[Container("c", {R: 1, R2: 1})]),
        Pod("c", containers=[Container("c", {R2: 1})]),
        Pod("d", containers=[Container("c", {R: 1}), Container("d", {R: 1, R2: 1})]),
        Pod("e", containers=[Container("c", {R: 1})]),
    ]
    async with running_manager(root) as m:
        plugins = {
            r: FakePlugin(m.plugin_dir / f"{i}.sock", r, make_devices(8), allocate=counters[r].allocate)
            for i, r in enumerate((R, R2))
        }
        async with serving(*plugins.values()):
            for plugin in plugins.values():
                await registered(m, plugin)
            await asyncio.gather(*(admit(m, pod) for pod in pods))
        owner = {
            (r, d): pod.uid
            for pod in pods
            for c in [*pod.init_containers, *pod.containers]
            for r in (R, R2)
            for d in held(m, pod.uid, c.name, r)
        }
    calls = {r: [{owner[(r, d)] for d in call} for call in plugins[r].allocate_calls] for r in (R, R2)}
    # Each call is one pod's, a pod's calls are together, and each plugin sees the pods in the order they
    # took its turn: c, needing only R2, takes it at once (a pod never waits for a plugin it does not use),
    # while b waits for R; b and d, using both, are in the same order on both.
    assert calls[R] == [{"a"}, {"a"}, {"b"}, {"d"}, {"d"}, {"e"}]
    assert calls[R2] == [{"c"}, {"b"}, {"d"}]
    assert counters[R].most == counters[R2].most == 1


async def test_a_call_queued_behind_one_in_flight_fails_when_its_plugin_stops_meanwhile(root: Path) -> None:
    def allocate(uid: str) -> Callable[[DeviceManager], Awaitable[None]]:
        pod = one_device_pod(uid)
        return lambda m: m.allocate(pod, pod.containers[0])

    async with first_call_held(root, allocate("a")) as (m, plugin, counter, first):
        second = asyncio.create_task(allocate("b")(m))
        plugin.end_streams()
        stopped = ["stopped"]
        await eventually(lambda: [r.state for r in m.registered_resources()] == stopped, what="stopped")
        counter.gate.set()
        # The call on its way ends as the stopped endpoint's channel does; the queued one never starts.
        await asyncio.gather(first, return_exceptions=True)
        with pytest.raises(AdmissionError) as err:
            await second
    assert str(err.value).startswith(f"device plugin Allocate rpc for {R} failed with err: endpoint {R} at ")
    assert str(err.value).endswith(" has been stopped")
    assert len(plugin.allocate_calls) == 1 and m.get_devices("b", "c") is None
