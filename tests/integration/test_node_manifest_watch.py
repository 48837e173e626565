"""The manifest folder is watched: a pod is admitted when its file is written, not at the next scan.

Both scan periods are set to an hour, so a pod that runs within the test's deadline was found by the
watch (inotify); the polling fallback is checked with inotify turned off.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kubedevice.node.daemon import NodeConfig, NodeDaemon
from tests.node_helpers import async_wait_for, short_tmpdir

HOUR = 3600.0


@pytest.fixture
def node(node_daemon: NodeDaemon) -> NodeDaemon:
    return node_daemon


def pod_yaml(name: str) -> str:
    return (
        "apiVersion: v1\nkind: Pod\n"
        f"metadata: {{name: {name}, namespace: default}}\n"
        "spec: {containers: [{name: app, image: busybox}]}\n"
    )


def phases(node: NodeDaemon) -> dict[str, str]:
    return {record.pod.name: record.phase for record in node.pods}


async def test_written_renamed_linked_and_removed_manifests_are_seen_at_once(node: NodeDaemon) -> None:
    folder = node.paths.manifests
    (folder / "a.yaml").write_text(pod_yaml("a"))
    await async_wait_for(
        lambda: phases(node).get("a") == "Running", "pod a Running after its file was written"
    )

    staged = folder / ".b.yaml.tmp"  # hidden: ignored until renamed into place
    staged.write_text(pod_yaml("b"))
    os.rename(staged, folder / "b.yaml")
    await async_wait_for(lambda: phases(node).get("b") == "Running", "pod b Running after a rename")

    elsewhere = Path(short_tmpdir("kd-src-"))
    try:
        (elsewhere / "c.yaml").write_text(pod_yaml("c"))
        shutil.copy(elsewhere / "c.yaml", folder / "c-copy.yaml")
        await async_wait_for(lambda: phases(node).get("c") == "Running", "pod c Running after a copy")
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)

    (folder / "a.yaml").unlink()
    await async_wait_for(lambda: "a" not in phases(node), "pod a gone after its file was removed")
    assert phases(node) == {"b": "Running", "c": "Running"}


async def test_a_folder_without_inotify_is_polled() -> None:
    root = short_tmpdir()
    config = NodeConfig(root_dir=root, scan_interval=0.05, rescan_interval=HOUR, use_inotify=False)
    daemon = NodeDaemon(config)
    await daemon.start()
    try:
        (daemon.paths.manifests / "p.yaml").write_text(pod_yaml("p"))
        await async_wait_for(lambda: phases(daemon).get("p") == "Running", "pod p Running by polling")
    finally:
        await daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_a_pod_restarts_only_when_its_own_document_changes(node: NodeDaemon) -> None:
    """The default UID hashes the decoded pod and its file's path, not the file's bytes (as the kubelet)."""
    folder = node.paths.manifests
    two = folder / "two.yaml"
    two.write_text(pod_yaml("a") + "---\n" + pod_yaml("b"))
    await async_wait_for(lambda: phases(node) == {"a": "Running", "b": "Running"}, "pods a and b Running")
    before = {record.pod.name: record for record in node.pods}

    reindented = pod_yaml("a").replace("metadata: ", "metadata:  ")
    two.write_text("# a comment\n" + reindented + "---\n" + pod_yaml("b"))
    (folder / "c.yaml").write_text(pod_yaml("c"))  # seen after the edit: the edit was read by then
    await async_wait_for(lambda: phases(node).get("c") == "Running", "pod c Running")
    assert {r.pod.name: r for r in node.pods if r.pod.name != "c"} == before

    two.write_text(pod_yaml("a") + "---\n" + pod_yaml("b").replace("busybox", "alpine"))
    new_b = lambda: [r for r in node.pods if r.pod.name == "b" and r.uid != before["b"].uid]  # noqa: E731
    await async_wait_for(lambda: bool(new_b()) and new_b()[0].phase == "Running", "the edited pod b again")
    current = {record.pod.name: record for record in node.pods}
    assert current["a"] is before["a"] and current["a"].phase == "Running"  # its neighbour went on
