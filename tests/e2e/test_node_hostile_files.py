"""Files a careless script or a hostile user leaves in the daemon's folders, as real processes: a FIFO, a
YAML alias bomb and documents 10,000 levels deep, in the manifest folder and in `resourceslices/`, beside
good files. The status API keeps answering, the good pod goes Running and the good slice is used, each bad
file is one line in `manifestErrors` or the slices' `fileErrors`, the log has no traceback, and files
written after them are still read (docs/bad-inputs.md)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.node_helpers import ALIAS_BOMB, NodeProcesses, pod_manifest, slice_yaml, wait_for

GPU = "example.com/gpu"
DEEP = "[" * 10_000 + "]" * 10_000
EXPECTED = {
    "fifo.yaml": "not a regular file (a FIFO)",
    "deep.yaml": "nested deeper than 100 levels",
    "deep.json": "nested deeper than 100 levels",
}


def put(folder: Path, name: str, text: str) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text)
    tmp.replace(folder / name)


def bad_files(folder: Path, bomb_head: str) -> None:
    os.mkfifo(folder / "fifo.yaml")
    put(folder, "bomb.yaml", bomb_head + ALIAS_BOMB)
    put(folder, "deep.yaml", DEEP + "\n")
    put(folder, "deep.json", DEEP)


def test_hostile_files_are_each_one_error_and_the_rest_goes_on(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 2)
    node.wait_capacity(GPU, 2, 2)
    node_name = node.node()["nodeName"]
    manifests, slices = node.paths.manifests, node.paths.resourceslices

    bad_files(manifests, pod_manifest("bomb", {GPU: 1}))
    node.write_manifest("good.yaml", pod_manifest("good", {GPU: 1}))
    bad_files(slices, "")
    put(slices, "good.yaml", slice_yaml("a", "gpu.example.com", "gpu-0", node=node_name))

    node.wait_phase("good", "Running")
    errors = wait_for(lambda: e if len(e := node.manifest_errors()) == 4 else None, "four bad manifests")
    assert {f: errors[f] for f in EXPECTED} == EXPECTED
    assert errors["bomb.yaml"].startswith("document contains excessive aliasing (490,329,036 of its")

    def slice_errors() -> dict[str, str] | None:
        listed = node.try_status("/resourceslices")
        found = {e["file"]: e["error"] for e in listed["fileErrors"]}
        return found if len(found) == 4 and listed["resourceSlices"] else None

    found = wait_for(slice_errors, "four bad slice files and the good slice")
    assert {f: found[f] for f in EXPECTED} == EXPECTED
    assert found["bomb.yaml"].startswith("document contains excessive aliasing")

    # Written after them: still read, in both folders.
    node.write_manifest("later.yaml", pod_manifest("later", {GPU: 1}))
    node.wait_phase("later", "Running")
    put(slices, "later.yaml", slice_yaml("b", "gpu.example.com", "gpu-1", node=node_name))
    wait_for(
        lambda: len(node.try_status("/resourceslices")["resourceSlices"]) == 2, "a slice written after them"
    )
    log = node.log("daemon")
    assert "Traceback" not in log and "RecursionError" not in log
    for name in EXPECTED:
        assert log.count(f"manifest {name}: ") == 1, name
        assert log.count(f"ResourceSlice file {name}: ") == 1, name
