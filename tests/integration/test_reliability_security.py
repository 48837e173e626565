"""Security: folder and socket modes whatever the umask, manifest symlinks, and a loopback status API.

Registration endpoints that escape the plugin dir (`..`, absolute paths, symlinks) are cases of the
bad-input catalogue (reg-dotdot, reg-absolute, reg-symlink); manifest symlinks out of the folder too
(mf-symlink). Here: what the daemon creates, what `--allow-symlinks` changes, where TCP binds.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kubedevice.node.cli import parse_http_addr
from kubedevice.node.daemon import NodeConfig, NodeDaemon
from tests.integration.fakeplugin import FakePlugin, make_devices
from tests.node_helpers import async_wait_for, pod_manifest, short_tmpdir

GPU = "example.com/gpu"


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    # The worst case: a daemon started by a shell with umask 0 must still not expose its sockets.
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
async def root() -> AsyncIterator[Path]:
    path = short_tmpdir("kd-sec-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


async def test_folders_are_0750_and_sockets_not_world_accessible(permissive_umask: None, root: Path) -> None:
    daemon = NodeDaemon(NodeConfig(root_dir=root, http_addr=parse_http_addr("0")))
    await daemon.start()
    try:
        paths = daemon.paths
        for folder in (
            paths.root,
            paths.plugin_dir,
            paths.plugins_registry,
            paths.pod_resources_socket.parent,
        ):
            assert _mode(folder) == 0o750, (folder, oct(_mode(folder)))
        for sock in (paths.kubelet_socket, paths.pod_resources_socket, paths.status_socket):
            assert stat.S_ISSOCK(os.lstat(sock).st_mode)
            assert _mode(sock) & 0o007 == 0, (sock, oct(_mode(sock)))
        # The status API on TCP listens on loopback only when no host is given.
        tcp = daemon.status_tcp_address
        assert tcp is not None and tcp[0] == "127.0.0.1"
        reader, writer = await asyncio.open_connection(*tcp)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.read()).startswith(b"HTTP/1.1 200")
        writer.close()
        await writer.wait_closed()
        # The checkpoint holds what every container got: only the daemon's user may read it.
        plugin = FakePlugin(paths.plugin_dir / "gpu.sock", GPU, make_devices(1))
        await plugin.start()
        try:
            await plugin.register(paths.kubelet_socket)
            await async_wait_for(lambda: paths.checkpoint.exists(), "the first checkpoint")
            assert _mode(paths.checkpoint) == 0o600
        finally:
            await plugin.stop()
    finally:
        await daemon.stop()


def test_the_default_http_address_is_loopback() -> None:
    assert parse_http_addr("8080") == ("127.0.0.1", 8080)
    assert parse_http_addr(":8080") == ("127.0.0.1", 8080)


async def test_manifest_symlinks_only_with_allow_symlinks(root: Path) -> None:
    outside = short_tmpdir("kd-out-")
    try:
        (outside / "evil.yaml").write_text(pod_manifest("evil", {GPU: 1}))
        inside = root / "manifests"
        inside.mkdir(parents=True)
        os.symlink(outside / "evil.yaml", inside / "evil.yaml")
        (inside / "real.yaml").write_text(pod_manifest("real", {GPU: 1}))
        os.symlink(inside / "real.yaml", inside / "alias.yml")  # inside the folder: fine, same pod twice

        strict = NodeDaemon(NodeConfig(root_dir=root, scan_interval=0.05))
        await strict.start()
        try:
            error = await async_wait_for(
                lambda: strict.bad_files.get("evil.yaml"), "the symlink to be refused"
            )
            assert "points outside the manifest folder (see --allow-symlinks)" in error
            assert "evil" not in {r.pod.name for r in strict.pods}
        finally:
            await strict.stop()

        allowing = NodeDaemon(NodeConfig(root_dir=root, scan_interval=0.05, allow_symlinks=True))
        await allowing.start()
        try:
            await async_wait_for(lambda: "evil" in {r.pod.name for r in allowing.pods}, "the allowed symlink")
            assert "evil.yaml" not in allowing.bad_files
        finally:
            await allowing.stop()
    finally:
        shutil.rmtree(outside)
