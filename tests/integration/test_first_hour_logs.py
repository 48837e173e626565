"""What the logs say in the first hour: a shutdown is no warning, an edit is an edit, quiet mistakes are said.

In-process node daemon and SDK plugins (real gRPC over real unix sockets), with the logs captured.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence

import pytest

from kubedevice.node.daemon import NodeConfig, NodeDaemon
from kubedevice.plugin import Device, PluginServer
from kubedevice.plugin.builtin.fake import FakeConfig, FakePlugin
from kubedevice.plugin.builtin.paths import PathsPlugin
from tests.node_helpers import async_wait_for, pod_manifest, short_tmpdir
from tests.plugin_kubelet import FakeKubelet, plugin_dir

__all__ = ["plugin_dir"]

GPU = "example.com/gpu"


def messages(caplog: pytest.LogCaptureFixture, level: int, fragment: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and fragment in r.getMessage()]


async def test_daemon_logs_a_created_folder_an_edit_and_a_quiet_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = short_tmpdir()
    caplog.set_level(logging.INFO)
    daemon = NodeDaemon(NodeConfig(root_dir=root, scan_interval=0.05))
    await daemon.start()
    try:
        assert messages(caplog, logging.INFO, f"created the manifest folder {daemon.paths.manifests}")
        plugin = FakePlugin(FakeConfig(GPU, 2, poll_interval=0.05))
        async with PluginServer(plugin, str(daemon.paths.plugin_dir), poll_interval=0.05):
            await async_wait_for(
                lambda: daemon.manager is not None and daemon.manager.get_capacity()[1].get(GPU) == 2, "GPUs"
            )
            manifest = daemon.paths.manifests / "p.yaml"
            manifest.write_text(pod_manifest("p", {GPU: 1}))
            await async_wait_for(lambda: [r.phase for r in daemon.pods] == ["Running"], "p Running")
            manifest.write_text(pod_manifest("p", {GPU: 2}))  # no metadata.uid: a new pod replaces it
            await async_wait_for(lambda: messages(caplog, logging.INFO, "its manifest changed"), "the edit")
            assert not messages(caplog, logging.INFO, "its manifest was removed")
            await daemon.stop()  # the plugin is still there: its stream ends because we stop
    finally:
        await daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert messages(caplog, logging.WARNING, "ListAndWatch ended") == []
    assert messages(caplog, logging.INFO, "ListAndWatch ended at shutdown")


class CountingPaths(PathsPlugin):
    calls = 0

    async def devices(self) -> Sequence[Device]:
        self.calls += 1
        return await super().devices()


class CountingFake(FakePlugin):
    calls = 0

    async def devices(self) -> Sequence[Device]:
        self.calls += 1
        return await super().devices()


async def test_a_glob_matching_nothing_and_a_missing_health_file_are_said_once(
    plugin_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    empty = CountingPaths("example.com/tty", os.path.join(plugin_dir, "ttyUSB*"), poll_interval=0.01)
    health = os.path.join(plugin_dir, "health.json")
    fake = CountingFake(FakeConfig(GPU, 2, health_file=health, poll_interval=0.01))
    kubelet = FakeKubelet(plugin_dir)
    async with kubelet, PluginServer(empty, plugin_dir), PluginServer(fake, plugin_dir):
        await kubelet.wait_registrations(2)
        await async_wait_for(lambda: empty.calls >= 5 and fake.calls >= 5, "five polls of each")
    assert len(messages(caplog, logging.WARNING, "no file matches")) == 1
    assert len(messages(caplog, logging.WARNING, f"health file {health} does not exist")) == 1
