"""What a manifest or slice file may be: a regular file within 3 MiB, each document within 1.5 MiB, 100 levels
deep, and within go-yaml's alias rule. Past a limit is that file's one-line error, in the manifest folder
and in the ResourceSlice folder alike, and the other files are read as usual."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubedevice.controlplane.slice_pools import read_slices
from kubedevice.node.manifest_folder import ManifestFolder
from kubedevice.resource.document_file import ManifestError, load_documents, read_document_file
from kubedevice.resource.document_limits import MAX_DOCUMENT_BYTES, MAX_FILE_BYTES
from tests.node_helpers import ALIAS_BOMB as BOMB_ALIASES
from tests.node_helpers import pod_manifest, slice_yaml

ALIAS_BOMB = pod_manifest("bomb", {}) + BOMB_ALIASES
DEEP_YAML = "[" * 10_000 + "]" * 10_000 + "\n"
DEEP_YAML_BLOCK = "".join(" " * level + "k:\n" for level in range(1_000))
DEEP_JSON = "[" * 10_000 + "]" * 10_000

POD = pod_manifest("good", {})
SLICE = slice_yaml("s1", "gpu.example.com", "gpu-0")


def test_the_alias_bomb_is_small() -> None:
    assert len(ALIAS_BOMB) < 1_500


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        (
            "bomb.yaml",
            ALIAS_BOMB,
            "document contains excessive aliasing (490,329,036 of its",
        ),
        ("deep.yaml", DEEP_YAML, "nested deeper than 100 levels"),
        ("block.yaml", DEEP_YAML_BLOCK, "nested deeper than 100 levels"),
        ("deep.json", DEEP_JSON, "nested deeper than 100 levels"),
        ("deep101.json", "[" * 101 + "]" * 101, "nested deeper than 100 levels"),
        ("self.yaml", "a: &a [1, *a]\n", "a YAML anchor's value contains itself"),
        ("big.yaml", f"a: '{'x' * MAX_DOCUMENT_BYTES}'\n", "larger than the 1.5 MiB limit of one object"),
        ("big.json", f'{{"a": "{"x" * MAX_DOCUMENT_BYTES}"}}', "larger than the 1.5 MiB limit of one object"),
        ("huge.yaml", "# " + "x" * MAX_FILE_BYTES, "larger than the 3 MiB limit of a manifest file"),
    ],
)
def test_a_document_past_a_limit_is_one_line_naming_it(name: str, text: str, error: str) -> None:
    with pytest.raises(ManifestError) as refused:
        load_documents(name, text.encode())
    assert error in str(refused.value) and "\n" not in str(refused.value)


def test_documents_within_the_limits_are_read() -> None:
    # Aliases a real manifest uses, two documents of 1 MiB, and 100 levels.
    shared = "x: &c {name: main, image: i}\ny: [*c, *c]\n"
    [doc] = load_documents("ok.yaml", shared.encode())
    assert doc["y"] == [{"name": "main", "image": "i"}] * 2
    big = f"a: '{'x' * (1 << 20)}'\n---\nb: '{'y' * (1 << 20)}'\n"
    assert len(load_documents("two.yaml", big.encode())) == 2
    assert load_documents("deep.json", ("[" * 100 + "]" * 100).encode()) != []
    assert load_documents("deep.yaml", ("[" * 100 + "]" * 100).encode()) != []


@pytest.fixture
def special_files(tmp_path: Path) -> Iterator[Path]:
    """A folder with a FIFO and a listening unix socket named like manifests."""
    os.mkfifo(tmp_path / "fifo.yaml")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "socket.yaml"))
        listener.listen()
        yield tmp_path


def test_only_a_regular_file_is_read(special_files: Path) -> None:
    # A FIFO nobody writes would block an open for reading forever: it is never opened.
    with pytest.raises(ManifestError, match=r"^not a regular file \(a FIFO\)$"):
        read_document_file(special_files / "fifo.yaml")
    with pytest.raises(ManifestError, match=r"^not a regular file \(a socket\)$"):
        read_document_file(special_files / "socket.yaml")
    os.symlink("fifo.yaml", special_files / "link.yaml")
    with pytest.raises(ManifestError, match=r"^not a regular file \(a FIFO\)$"):
        read_document_file(special_files / "link.yaml")


def test_a_file_past_the_size_limit_is_not_read_whole(tmp_path: Path) -> None:
    # Sparse: a terabyte costs no disk, and a read of it all would never end.
    with open(tmp_path / "huge.yaml", "wb") as f:
        f.truncate(1 << 40)
    with pytest.raises(ManifestError, match="larger than the 3 MiB limit of a manifest file"):
        read_document_file(tmp_path / "huge.yaml")
    (tmp_path / "limit.yaml").write_bytes(b"#" * MAX_FILE_BYTES)
    assert len(read_document_file(tmp_path / "limit.yaml")) == MAX_FILE_BYTES


def bad_files(folder: Path) -> None:
    (folder / "bomb.yaml").write_text(ALIAS_BOMB)
    (folder / "deep.yaml").write_text(DEEP_YAML)
    (folder / "deep.json").write_text(DEEP_JSON)


def test_the_manifest_folder_lists_each_bad_file_and_reads_the_good_one(special_files: Path) -> None:
    bad_files(special_files)
    (special_files / "pod.yaml").write_text(POD)
    result = ManifestFolder(special_files).scan()
    assert [m.pod.name for m in result.pods] == ["good"]
    assert result.errors == {
        "bomb.yaml": pytest.approx(result.errors["bomb.yaml"]),
        "deep.json": "nested deeper than 100 levels",
        "deep.yaml": "nested deeper than 100 levels",
        "fifo.yaml": "not a regular file (a FIFO)",
        "socket.yaml": "not a regular file (a socket)",
    }
    assert result.errors["bomb.yaml"].startswith("document contains excessive aliasing")


def test_the_slice_folder_reports_each_bad_file_and_reads_the_good_one(special_files: Path) -> None:
    bad_files(special_files)
    (special_files / "slice.yaml").write_text(SLICE)
    scan = read_slices(special_files, "node-1")
    assert [s.meta.name for s in scan.slices] == ["s1"]
    errors = {r.file: r.message for r in scan.errors}
    assert errors["fifo.yaml"] == "not a regular file (a FIFO)"
    assert errors["socket.yaml"] == "not a regular file (a socket)"
    assert errors["deep.yaml"] == errors["deep.json"] == "nested deeper than 100 levels"
    assert errors["bomb.yaml"].startswith("document contains excessive aliasing")
    assert len(scan.errors) == 5


def test_an_accepted_document_with_aliases_is_loaded_by_both_loaders_alike() -> None:
    text = "a: &a {k: [1, 2]}\nb: *a\nc: [*a, *a]\n"
    assert load_documents("x.yaml", text.encode()) == [yaml.safe_load(text)]


def test_an_alias_that_puts_a_subtree_past_the_depth_limit_is_refused() -> None:
    # 60 levels under an anchor, used again 60 levels down: 120 levels once expanded.
    text = "a: &d " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 59 + "*d" + "]" * 59 + "\n"
    with pytest.raises(ManifestError, match=r"^nested deeper than 100 levels$"):
        load_documents("x.yaml", text.encode())


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_never_read(tmp_path: Path) -> None:
    # A copy of /dev/zero's node: a read without a limit would never end.
    os.mknod(tmp_path / "zero.yaml", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    with pytest.raises(ManifestError, match=r"^not a regular file \(a character device\)$"):
        read_document_file(tmp_path / "zero.yaml")


def test_a_folder_a_broken_symlink_and_a_symlink_loop_are_each_one_line(tmp_path: Path) -> None:
    """Found by the fuzz suite: a folder named like a manifest was skipped without a word (the kubelet logs
    "Not recursing into manifest path"), and a broken symlink read as a file that "vanished" in the
    manifest folder and as nothing at all in the slice folder."""
    (tmp_path / "folder.yaml").mkdir()
    (tmp_path / "folder.yaml" / "inside.yaml").write_text(POD)
    os.symlink("missing.yaml", tmp_path / "broken.yaml")
    os.symlink("loop.yaml", tmp_path / "loop.yaml")
    expected = {
        "folder.yaml": "not a regular file (a directory)",
        "broken.yaml": f"symlink to {tmp_path / 'missing.yaml'}, which does not exist",
        "loop.yaml": "cannot read: Too many levels of symbolic links",
    }
    folder = ManifestFolder(tmp_path)
    assert folder.scan().errors == expected
    assert folder.scan(names=sorted(expected)).errors == expected
    assert {r.file: r.message for r in read_slices(tmp_path, "node-1").errors} == expected
    # Removed: gone from a scan by names, with nothing left behind.
    (tmp_path / "broken.yaml").unlink()
    (tmp_path / "folder.yaml" / "inside.yaml").unlink()
    (tmp_path / "folder.yaml").rmdir()
    gone = folder.scan(names=["broken.yaml", "folder.yaml"])
    assert (gone.errors, gone.covered) == ({}, {"broken.yaml", "folder.yaml"})
    assert folder.scan().errors == {"loop.yaml": expected["loop.yaml"]}
