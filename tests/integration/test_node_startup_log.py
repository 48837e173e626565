"""A daemon starting over many checkpointed pods logs them as one line, not one line per pod."""

from __future__ import annotations

import logging
import shutil

import pytest

from kubedevice.checkpoint import CheckpointData, CheckpointStore, PodDevicesEntry
from kubedevice.node.daemon import NodeConfig, NodeDaemon, NodePaths
from tests.waiting import short_tempdir


def _checkpoint(paths: NodePaths, pods: int) -> None:
    paths.plugin_dir.mkdir(parents=True, mode=0o750)
    entries = [
        PodDevicesEntry(f"uid-{i:03d}", "main", "example.com/gpu", {0: [f"gpu-{i}"]}, b"")
        for i in range(pods)
    ]
    CheckpointStore(paths.plugin_dir).write(
        CheckpointData(entries, {"example.com/gpu": [f"gpu-{i}" for i in range(pods)]})
    )


@pytest.mark.parametrize("pods", [3, 40])
async def test_pods_gone_from_the_manifests_at_start_are_one_line_when_many(
    pods: int, caplog: pytest.LogCaptureFixture
) -> None:
    root = short_tempdir("kd-node-")
    try:
        daemon = NodeDaemon(NodeConfig(root_dir=root))
        _checkpoint(daemon.paths, pods)
        with caplog.at_level(logging.INFO, logger="kubedevice.node.daemon"):
            await daemon.start()
            await daemon.stop()
        assert daemon.manager is not None and daemon.manager.pod_uids() == set()
        lines = [r.getMessage() for r in caplog.records if "gone from the manifests" in r.getMessage()]
        if pods == 3:
            assert lines == [
                f"pod uid-{i:03d} is gone from the manifests: its devices were freed" for i in range(3)
            ]
        else:
            freed = "40 pods are gone from the manifests: their devices were freed"
            assert lines == [f"{freed} (uid-000, uid-001, uid-002, ...)"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
