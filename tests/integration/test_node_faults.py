"""Faults no input reaches by design, and a manifest folder that cannot be listed (issue 35): never a dead
daemon, never a lost pod.

A first scan that raises (a file's own failure is that file's error: a bug) is one log line and is tried
again at the next scan; until one succeeds the sources are not ready, as the kubelet's are not: nothing is
restored, admitted or garbage-collected, so the devices of the pods that ran before the restart stay
theirs. A folder that cannot be listed (here: replaced by a regular file) is the folder's one line in the
manifest errors and changes no pod, as the kubelet's file source sends no update then. A DRA step that
raises is the pod's `SchedulerError`, as the scheduler's internal error, and is tried again. The faults are
injected into the daemon's own objects, once each; files, sockets and the gRPC calls are real.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.controlplane.plane import ControlPlane
from kubedevice.node.daemon import NodeConfig, NodeDaemon
from kubedevice.node.manifest_folder import ManifestFolder
from kubedevice.node.pod_workers import PodWorkers
from kubedevice.node.pods import PodRecord
from tests.integration.fakeplugin import FakePlugin, make_devices
from tests.node_dra_helpers import DRIVER, GPU_CLASS, NODE, claim_yaml, pod_yaml
from tests.node_helpers import async_wait_for, pod_manifest, short_tmpdir, slice_yaml

GPU = "example.com/gpu"


class Node:
    """In-process daemons on one root, one at a time, with one plugin serving `example.com/gpu`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.daemon: NodeDaemon | None = None
        self.plugin: FakePlugin | None = None

    async def start(self, **config: Any) -> NodeDaemon:
        self.daemon = NodeDaemon(NodeConfig(root_dir=self.root, scan_interval=0.05, **config))
        await self.daemon.start()
        if self.plugin is not None:  # the daemon removed its socket at start, as the kubelet does
            await self.plugin.stop()
        socket = self.daemon.paths.plugin_dir / "gpu.sock"
        self.plugin = await FakePlugin(socket, GPU, make_devices(2)).start()
        await self.plugin.register(self.daemon.paths.kubelet_socket)
        manager = self.daemon.manager
        assert manager is not None
        # A pod admitted before the plugin's first list would find no device.
        await async_wait_for(lambda: manager.get_capacity()[1].get(GPU) == 2, "the plugin's devices")
        return self.daemon

    async def stop(self) -> None:
        if self.daemon is not None:
            await self.daemon.stop()
            self.daemon = None

    def devices(self, name: str) -> dict[str, Any] | None:
        """A Running pod's devices, None while it is not Running."""
        assert self.daemon is not None and self.daemon.manager is not None
        for record in self.daemon.pods:
            if record.pod.name == name and record.phase == "Running":
                return self.daemon.manager.get_devices(record.uid, "main")
        return None


def fail_once(monkeypatch: pytest.MonkeyPatch, cls: type, method: str) -> None:
    """`cls.method` raises RuntimeError("injected fault") the first time it is called, then works."""
    real = getattr(cls, method)
    faults = [RuntimeError("injected fault")]

    def failing_once(self: object, *args: Any, **kwargs: Any) -> Any:
        if faults:
            raise faults.pop()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, failing_once)


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    made = Node(short_tmpdir("kd-scan-"))
    try:
        yield made
    finally:
        await made.stop()
        if made.plugin is not None:
            await made.plugin.stop()
        shutil.rmtree(made.root, ignore_errors=True)


async def test_a_first_scan_that_raises_is_logged_tried_again_and_frees_nothing(
    node: Node, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = await node.start()
    (daemon.paths.manifests / "p.yaml").write_text(pod_manifest("p", {GPU: 1}))
    held = await async_wait_for(lambda: node.devices("p"), "pod p Running")
    await node.stop()

    # The next daemon's first scan raises: a fault injected into the folder's reader (not reachable from
    # any file, by design).
    fail_once(monkeypatch, ManifestFolder, "scan")
    with caplog.at_level(logging.INFO):
        daemon = await node.start()
    assert daemon.manager is not None
    failed = [r.getMessage() for r in caplog.records if "failed, tried again" in r.getMessage()]
    assert failed == [
        f"scanning {daemon.paths.manifests} failed, tried again at the next scan: "
        "RuntimeError: injected fault"
    ]
    assert all(r.exc_info is None for r in caplog.records), "no traceback in the log"
    # Not ready: p's devices are still its own in the checkpoint, and nothing was admitted.
    assert not daemon.manager.sources_ready
    assert len(daemon.manager.pod_uids()) == 1 and list(daemon.pods) == []

    # The next scan (a file written wakes it) reads the folder: p goes on with its devices, q is admitted.
    (daemon.paths.manifests / "q.yaml").write_text(pod_manifest("q", {GPU: 1}))
    await async_wait_for(lambda: node.devices("q"), "pod q Running")
    assert node.devices("p") == held
    assert daemon.manager.sources_ready


async def test_a_folder_that_cannot_be_listed_keeps_its_pods(node: Node) -> None:
    daemon = await node.start(rescan_interval=0.1)
    folder = daemon.paths.manifests
    (folder / "p.yaml").write_text(pod_manifest("p", {GPU: 1}))
    held = await async_wait_for(lambda: node.devices("p"), "pod p Running")

    aside = folder.with_name("manifests.aside")
    os.rename(folder, aside)
    folder.write_text("not a folder")
    error = await async_wait_for(lambda: daemon.bad_files.get(str(folder)), "the folder's line")
    assert error == "cannot list the manifest folder: Not a directory"
    # The scan that found it is the one that would have ended p (its file gone from the listing).
    assert node.devices("p") == held

    folder.unlink()
    os.rename(aside, folder)
    await async_wait_for(lambda: str(folder) not in daemon.bad_files, "the folder's line to go")
    assert node.devices("p") == held and [r.pod.name for r in daemon.pods] == ["p"]


async def test_a_dra_step_that_raises_is_the_pods_scheduler_error_and_tried_again(
    node: Node, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fail_once(monkeypatch, ControlPlane, "schedule")
    # Every reason the pod workers give the pod, in order: the SchedulerError lasts only until the retry
    # (dra_retry_period), too short for a poll of the pod's status to be sure to see it.
    reasons: list[tuple[str, str]] = []
    wait = PodWorkers._wait

    def recorded(
        self: PodWorkers, record: PodRecord, reason: str, message: str, *rest: Any, **kw: Any
    ) -> None:
        if record.pod.name == "p":
            reasons.append((reason, message))
        wait(self, record, reason, message, *rest, **kw)

    monkeypatch.setattr(PodWorkers, "_wait", recorded)
    daemon = await node.start(node_name=NODE, dra_retry_period=0.1)
    (daemon.paths.resourceslices / "gpu.yaml").write_text(slice_yaml("s", DRIVER, "gpu-0", node=NODE))
    (daemon.paths.manifests / "p.yaml").write_text(
        "---\n".join([GPU_CLASS, claim_yaml("c", None), pod_yaml("p", "c")])
    )

    def given(wanted: str) -> bool:
        return any(reason == wanted for reason, _ in reasons)

    # Tried again: scheduled this time, then refused by the DRA manager (no driver registered).
    await async_wait_for(lambda: given("FailedPrepareDynamicResources"), "the next try")
    assert reasons[0] == ("SchedulerError", "internal error in the DRA step: RuntimeError: injected fault")
    assert [r for r, _ in reasons if r == "SchedulerError"] == ["SchedulerError"]
    record = next(r for r in daemon.pods if r.pod.name == "p")
    assert record.phase == "Pending" and "DRA driver gpu.example.com is not registered" in record.message
    waits = [r.getMessage() for r in caplog.records if "internal error" in r.getMessage()]
    assert len(waits) == 1 and all(r.exc_info is None for r in caplog.records if r.levelno > logging.DEBUG)
