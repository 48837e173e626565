"""How the node daemon admits many pods at once: each plugin sees one Allocate (and one PreStartContainer)
at a time, in admission order, while the checkpoint writes are shared by the pods allocated meanwhile;
and a pod is Running only once the checkpoint holding its devices is on disk.

The daemon runs in this process with a real plugin on a real socket, so a watcher task on the same event
loop sees every state the daemon passes through between two of its awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint import CheckpointStore
from kubedevice.node.daemon import NodeDaemon
from tests.integration.fakeplugin import FakePlugin, default_allocate, make_devices
from tests.node_helpers import async_wait_for

RESOURCE = "example.com/fake"
PODS = 12


@pytest.fixture
def node(node_daemon: NodeDaemon) -> NodeDaemon:
    return node_daemon


def pod_yaml(name: str, count: int = 1) -> str:
    return (
        "apiVersion: v1\nkind: Pod\n"
        f"metadata: {{name: {name}, namespace: default}}\n"
        "spec: {containers: [{name: app, image: busybox, "
        f"resources: {{limits: {{{RESOURCE}: {count}}}}}}}]}}\n"
    )


class CountingPlugin(FakePlugin):
    """Records the most Allocate, and the most PreStartContainer, calls in flight at once."""

    def __init__(
        self, socket_path: Path, devices: int, resource: str = RESOURCE, delay: float = 0.002
    ) -> None:
        super().__init__(
            socket_path,
            resource,
            make_devices(devices),
            options=dp.DevicePluginOptions(pre_start_required=True),
            allocate=self._allocate,
        )
        self.delay = delay
        self.in_flight = {"Allocate": 0, "PreStartContainer": 0}
        self.most_in_flight = dict(self.in_flight)

    async def _allocate(self, request: dp.AllocateRequest) -> dp.AllocateResponse:
        async with self._counted("Allocate"):
            return await default_allocate(request)

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: object
    ) -> dp.PreStartContainerResponse:
        self.prestart_calls.append(list(request.devices_ids))
        async with self._counted("PreStartContainer"):
            return dp.PreStartContainerResponse()

    @contextlib.asynccontextmanager
    async def _counted(self, call: str) -> AsyncIterator[None]:
        self.in_flight[call] += 1
        self.most_in_flight[call] = max(self.most_in_flight[call], self.in_flight[call])
        try:
            await asyncio.sleep(self.delay)  # long enough for another admission to try to overlap
            yield
        finally:
            self.in_flight[call] -= 1


@pytest.fixture
async def plugin(node: NodeDaemon) -> AsyncIterator[CountingPlugin]:
    plugin = CountingPlugin(node.paths.plugin_dir / "counting.sock", PODS)
    await plugin.start()
    try:
        await plugin.register(node.paths.kubelet_socket)
        await async_wait_for(
            lambda: node.manager is not None and node.manager.get_capacity()[1].get(RESOURCE) == PODS,
            "the plugin's devices allocatable",
        )
        yield plugin
    finally:
        await plugin.stop()


def _running(node: NodeDaemon) -> dict[str, str]:
    return {r.uid: r.pod.name for r in node.pods if r.phase == "Running"}


async def test_pods_written_at_once_call_the_plugin_one_at_a_time_and_run_only_once_checkpointed(
    node: NodeDaemon, plugin: CountingPlugin
) -> None:
    store = CheckpointStore(node.paths.plugin_dir)
    reported: set[str] = set()
    violations: list[str] = []

    async def watch() -> None:
        # Every pod seen Running for the first time must already be in the checkpoint on disk.
        while True:
            fresh = set(_running(node)) - reported
            if fresh:
                entries = store.read().data.pod_device_entries or []
                on_disk = {e.pod_uid for e in entries}
                violations.extend(sorted(fresh - on_disk))
                reported.update(fresh)
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    try:
        for i in range(PODS):
            (node.paths.manifests / f"p{i:02d}.yaml").write_text(pod_yaml(f"p{i:02d}"))
        await async_wait_for(lambda: len(_running(node)) == PODS, f"{PODS} pods Running")
        await async_wait_for(lambda: len(reported) == PODS, "the watcher to see every pod Running")
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    assert violations == [], "pods reported Running before the checkpoint holding them was on disk"
    assert plugin.most_in_flight == {"Allocate": 1, "PreStartContainer": 1}
    assert len(plugin.allocate_calls) == PODS
    # PreStartContainer follows the order of the Allocate calls: the admission order.
    assert plugin.prestart_calls == plugin.allocate_calls
    assert sorted(d for call in plugin.allocate_calls for d in call) == sorted(f"dev{i}" for i in range(PODS))


def containers_yaml(name: str, containers: list[dict[str, int]], init: list[dict[str, int]]) -> str:
    def listed(prefix: str, limits: list[dict[str, int]]) -> str:
        return ", ".join(
            f"{{name: {prefix}{i}, image: busybox, resources: {{limits: {{"
            + ", ".join(f"{r}: {n}" for r, n in c.items())
            + "}}}"
            for i, c in enumerate(limits)
        )

    return (
        "apiVersion: v1\nkind: Pod\n"
        f"metadata: {{name: {name}, namespace: default}}\n"
        f"spec: {{initContainers: [{listed('init', init)}], containers: [{listed('app', containers)}]}}\n"
    )


async def test_pods_of_many_shapes_keep_the_turns_on_every_plugin(node: NodeDaemon) -> None:
    other = "example.com/other"
    # The other plugin is slower: a pod using both is still at it when the next pods are done with RESOURCE.
    plugins = [
        CountingPlugin(node.paths.plugin_dir / "0.sock", 16),
        CountingPlugin(node.paths.plugin_dir / "1.sock", 16, other, delay=0.02),
    ]
    shapes: list[tuple[list[dict[str, int]], list[dict[str, int]]]] = [
        ([{RESOURCE: 2}], [{RESOURCE: 1}]),  # two Allocate calls on RESOURCE (one device reused)
        ([{RESOURCE: 1, other: 1}], []),
        ([{RESOURCE: 1}], []),  # done with RESOURCE long before the pod before it is done with other
        ([{other: 1}], []),
        ([{RESOURCE: 1}, {RESOURCE: 1, other: 1}], []),
        ([{RESOURCE: 1}], [{other: 1}]),
    ]
    for plugin in plugins:
        await plugin.start()
    try:
        for plugin in plugins:
            await plugin.register(node.paths.kubelet_socket)
        await async_wait_for(
            lambda: node.manager is not None and node.manager.get_capacity()[1] == {RESOURCE: 16, other: 16},
            "both plugins' devices allocatable",
        )
        for i, (app, init) in enumerate(shapes * 2):
            (node.paths.manifests / f"s{i:02d}.yaml").write_text(containers_yaml(f"s{i:02d}", app, init))
        await async_wait_for(lambda: len(_running(node)) == len(shapes) * 2, "every pod Running")
    finally:
        for plugin in plugins:
            await plugin.stop()
    manager = node.manager
    assert manager is not None
    owner = {
        (r, d): uid
        for uid in _running(node)
        for c in manager.container_names(uid)
        for r, devices in (manager.get_devices(uid, c) or {}).items()
        for d in devices
    }
    orders = []
    for plugin in plugins:
        assert plugin.most_in_flight == {"Allocate": 1, "PreStartContainer": 1}
        allocating = [{owner[(plugin.resource, d)] for d in call} for call in plugin.allocate_calls]
        starting = [{owner[(plugin.resource, d)] for d in call} for call in plugin.prestart_calls]
        assert all(len(pods) == 1 for pods in allocating + starting)  # a call is one pod's
        # A pod's calls are together, and its containers start in the order the pods were allocated.
        allocated_order = [p for i, (p,) in enumerate(allocating) if i == 0 or allocating[i - 1] != {p}]
        started_order = [p for i, (p,) in enumerate(starting) if i == 0 or starting[i - 1] != {p}]
        assert len(allocated_order) == len(set(allocated_order)) and started_order == allocated_order
        orders.append(allocated_order)
    # Pods using both plugins are in the same order on both.
    both = set(orders[0]) & set(orders[1])
    assert [p for p in orders[0] if p in both] == [p for p in orders[1] if p in both]


async def test_a_checkpoint_that_cannot_be_written_fails_the_pod_and_frees_its_devices(
    node: NodeDaemon, plugin: CountingPlugin
) -> None:
    checkpoint = node.paths.checkpoint
    checkpoint.unlink(missing_ok=True)
    checkpoint.mkdir()  # a write renames its temporary file over this path: that fails
    (checkpoint / "keep").write_text("a directory in the way")
    (node.paths.manifests / "p.yaml").write_text(pod_yaml("p"))
    await async_wait_for(lambda: any(r.phase == "Failed" for r in node.pods), "the pod to fail its admission")
    (record,) = list(node.pods)
    assert record.reason == "UnexpectedAdmissionError"
    assert record.message.startswith('failed to write checkpoint file "kubelet_internal_checkpoint"'), (
        record.message
    )
    assert node.manager is not None and node.manager.allocated_device_counts().get(RESOURCE, 0) == 0
    assert plugin.prestart_calls == []
