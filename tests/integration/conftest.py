"""Fixtures shared by the integration tests."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kubedevice.node.daemon import NodeConfig, NodeDaemon
from tests.waiting import short_tempdir

HOUR = 3600.0


@pytest.fixture
def root() -> Iterator[Path]:
    """A temporary folder short enough for unix socket paths, removed afterwards."""
    d = short_tempdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
async def node_daemon() -> AsyncIterator[NodeDaemon]:
    """A node daemon in this process whose manifest folder is scanned in full only hourly: a pod that
    runs within a test's deadline was found by the folder watch."""
    root = short_tempdir("kd-node-")
    daemon = NodeDaemon(NodeConfig(root_dir=root, scan_interval=HOUR, rescan_interval=HOUR))
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
