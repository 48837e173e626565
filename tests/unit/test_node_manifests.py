import json
import os
from pathlib import Path

import pytest
import yaml

from kubedevice.node.manifest_folder import ManifestFolder
from kubedevice.node.manifests import parse_manifest
from kubedevice.resource.document_file import ManifestError
from kubedevice.resource.identity import document_uid

GOOD = b"""apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
spec:
  initContainers:
  - name: setup
    resources: {limits: {example.com/gpu: 1}}
  - name: sidecar
    restartPolicy: Always
    resources: {limits: {example.com/nic: "1"}, requests: {example.com/nic: 1}}
  containers:
  - name: train
    resources:
      limits: {example.com/gpu: 2, cpu: 500m, memory: 1Gi}
      requests: {example.com/gpu: 2, cpu: 100m}
"""


def test_parses_a_pod_with_init_containers_and_sidecars() -> None:
    [m] = parse_manifest("trainer.yaml", GOOD)
    pod = m.pod
    assert (pod.namespace, pod.name, m.file, m.succeeded) == ("ml", "trainer", "trainer.yaml", False)
    assert pod.uid == document_uid(yaml.safe_load(GOOD), "ml", "trainer", "trainer.yaml")
    assert [(c.name, c.limits, c.restart_policy) for c in pod.init_containers] == [
        ("setup", {"example.com/gpu": 1}, None),
        ("sidecar", {"example.com/nic": 1}, "Always"),
    ]
    [train] = pod.containers
    assert train.limits == {"example.com/gpu": 2}  # cpu and memory are not the device manager's


def test_a_device_class_name_is_an_extended_resource_other_kubernetes_io_names_are_native() -> None:
    """`deviceclass.resource.kubernetes.io/<class>` asks for a device of that class through DRA, though its
    domain is Kubernetes' own; other `kubernetes.io/` names stay out of the device manager's limits."""
    pod = b"""apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: main
    resources:
      limits: {deviceclass.resource.kubernetes.io/gpu.example.com: 2, example.kubernetes.io/thing: 1}
"""
    [m] = parse_manifest("p.yaml", pod)
    assert m.pod.containers[0].limits == {"deviceclass.resource.kubernetes.io/gpu.example.com": 2}


def test_editing_the_pod_makes_a_new_pod_unless_the_uid_is_given() -> None:
    [a] = parse_manifest("p.yaml", GOOD, "/m/p.yaml")
    [b] = parse_manifest("p.yaml", GOOD.replace(b"cpu: 100m", b"cpu: 200m"), "/m/p.yaml")
    assert a.uid != b.uid and a.digest != b.digest
    fixed = GOOD.replace(b"  namespace: ml\n", b"  namespace: ml\n  uid: my-uid\n")
    [c] = parse_manifest("p.yaml", fixed)
    [d] = parse_manifest("p.yaml", fixed.replace(b"cpu: 100m", b"cpu: 200m"))
    assert c.uid == d.uid == "my-uid" and c.digest != d.digest


def test_comments_layout_and_other_documents_do_not_change_a_pod() -> None:
    [a] = parse_manifest("p.yaml", GOOD, "/m/p.yaml")
    as_flow = json.dumps(yaml.safe_load(GOOD), indent=7).encode()  # JSON is YAML: other layout, same pod
    for same in (b"# a comment\n" + GOOD + b"# another\n", as_flow):
        [b] = parse_manifest("p.yaml", same, "/m/p.yaml")
        assert (b.uid, b.digest) == (a.uid, a.digest)
    [elsewhere] = parse_manifest("p.yaml", GOOD, "/other/p.yaml")
    assert elsewhere.uid != a.uid and elsewhere.digest == a.digest  # the source is part of the UID
    other = GOOD.replace(b"name: trainer", b"name: other")
    first = parse_manifest("two.yaml", GOOD + b"---\n" + other, "/m/two.yaml")
    edited = parse_manifest("two.yaml", GOOD + b"---\n" + other.replace(b"gpu: 2", b"gpu: 1"), "/m/two.yaml")
    assert (first[0].uid, first[0].digest) == (edited[0].uid, edited[0].digest)  # the neighbour stays
    assert first[1].uid != edited[1].uid


def test_document_uid_reads_values_json_cannot_hold() -> None:
    doc = yaml.safe_load("a: 2024-01-02\nb: !!binary aGk=\nc: !!set {x, y}\n1: one\nd: .nan\n")
    assert document_uid(doc, "ns", "n", "/f") == document_uid(dict(reversed(doc.items())), "ns", "n", "/f")
    assert document_uid(doc, "ns", "n", "/f") != document_uid({**doc, 1: "two"}, "ns", "n", "/f")


def test_several_documents_json_lists_and_succeeded_pods() -> None:
    two = GOOD + b"---\n" + GOOD.replace(b"name: trainer", b"name: other") + b"---\n"
    assert [m.pod.name for m in parse_manifest("two.yml", two)] == ["trainer", "other"]
    as_json = (
        b'{"kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},'
        b'"spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Succeeded"}}]}'
    )
    [j] = parse_manifest("j.json", as_json)
    assert (j.pod.namespace, j.pod.name, j.succeeded) == ("default", "j", True)
    annotated = GOOD.replace(
        b"  namespace: ml\n", b'  namespace: ml\n  annotations:\n    kubedevice.io/phase: "Succeeded"\n'
    )
    assert parse_manifest("a.yaml", annotated)[0].succeeded


@pytest.mark.parametrize(
    ("file", "content", "fragment"),
    [
        ("bad.yaml", b"kind: Pod\n  - : [", "YAML error"),
        ("bad.json", b"{", "JSON error"),
        ("bad.yaml", b"", "no document in the file"),
        ("bad.yaml", b"- 1\n- 2\n", "not an object (a list, not a mapping)"),
        (
            "bad.yaml",
            b"apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
            'unsupported kind "Service" (apiVersion "v1") — supported: Pod, Namespace, ResourceClaim, '
            "ResourceClaimTemplate, DeviceClass",
        ),
        (
            "bad.yaml",
            b"apiVersion: apps/v1\nkind: Pod\nmetadata: {name: s}\n",
            'kind Pod: apiVersion "apps/v1" is not supported (use v1)',
        ),
        ("bad.yaml", GOOD.replace(b"  name: trainer\n", b""), "missing metadata.name"),
        ("bad.yaml", GOOD.replace(b"example.com/gpu: 2,", b"example.com/gpu: 1.5,"), "not a whole number"),
        ("bad.yaml", GOOD.replace(b"example.com/gpu: 2,", b"example.com/gpu: lots,"), "not a quantity"),
        (
            "bad.yaml",
            GOOD.replace(b"requests: {example.com/gpu: 2", b"requests: {example.com/gpu: 1"),
            "requests (1) and limits (2) of example.com/gpu must be equal",
        ),
        (
            "bad.yaml",
            GOOD.replace(b"limits: {example.com/gpu: 2, ", b"limits: {"),
            "has requests but no limits",
        ),
        (
            "bad.yaml",
            GOOD.replace(b"example.com/gpu: 2,", b"Example.com/gpu: 2,"),
            "not a valid extended resource",
        ),
        (
            "bad.yaml",
            GOOD.replace(b"example.com/gpu: 2", b"deviceclass.resource.kubernetes.io/Big_GPU: 2"),
            "'deviceclass.resource.kubernetes.io/Big_GPU' is not a valid extended resource name "
            "(a DeviceClass name must follow the prefix)",
        ),
        ("bad.yaml", GOOD.replace(b"name: setup", b"name: train"), "container name 'train' is used twice"),
        (
            "bad.yaml",
            GOOD.replace(b"  containers:\n  - name: train", b"  containers: []\n  - name: train"),
            "YAML error",
        ),
        (
            "bad.yaml",
            b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: []}\n",
            "at least one container",
        ),
        (
            "bad.yaml",
            b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{image: i}]}\n",
            "has no name",
        ),
        ("bad.yaml", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_manifests_name_the_problem(file: str, content: bytes, fragment: str) -> None:
    with pytest.raises(ManifestError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_manifest(file, content)


def test_folder_scan_reports_bad_files_and_keeps_the_good(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_bytes(GOOD)
    (tmp_path / "broken.yml").write_bytes(b"kind: [")
    (tmp_path / "notes.txt").write_text("ignored")
    (tmp_path / ".editor.yaml.swp").write_text("ignored")
    result = ManifestFolder(tmp_path).scan()
    assert [m.pod.name for m in result.pods] == ["trainer"]
    assert list(result.errors) == ["broken.yml"] and "YAML error" in result.errors["broken.yml"]


def test_folder_rescans_only_changed_files_and_detects_edits(tmp_path: Path) -> None:
    folder = ManifestFolder(tmp_path)
    path = tmp_path / "p.yaml"
    path.write_bytes(GOOD)
    first = folder.scan().pods[0].uid
    assert first == document_uid(yaml.safe_load(GOOD), "ml", "trainer", "p.yaml")  # relative path
    assert folder.scan().pods[0].uid == first
    path.write_bytes(GOOD + b"# a comment only: the same pod\n")
    assert folder.scan().pods[0].uid == first
    path.write_bytes(GOOD.replace(b"gpu: 2", b"gpu: 1"))
    assert folder.scan().pods[0].uid != first
    path.unlink()
    assert folder.scan().pods == []


def test_duplicate_pods_across_files_keep_the_known_one(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_bytes(GOOD)
    folder = ManifestFolder(tmp_path)
    [known] = folder.scan().pods
    (tmp_path / "a.yaml").write_bytes(GOOD + b"# same pod name, other file\n")
    result = folder.scan(known_uids=[known.uid])
    assert [m.file for m in result.pods] == ["b.yaml"]
    assert (
        "pod ml/trainer" in result.errors["a.yaml"] and "already defined by b.yaml" in result.errors["a.yaml"]
    )
    fresh = ManifestFolder(tmp_path).scan()  # nobody known: the first file in name order wins
    assert [m.file for m in fresh.pods] == ["a.yaml"] and "b.yaml" in fresh.errors


def test_symlinks_outside_the_folder_are_refused_unless_allowed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_bytes(GOOD)
    folder = tmp_path / "manifests"
    folder.mkdir()
    os.symlink(outside, folder / "link.yaml")
    (folder / "inside-target.txt").write_bytes(GOOD.replace(b"name: trainer", b"name: inner"))
    os.symlink(folder / "inside-target.txt", folder / "inner.yaml")
    result = ManifestFolder(folder).scan()
    assert [m.pod.name for m in result.pods] == ["inner"]
    assert "points outside the manifest folder" in result.errors["link.yaml"]
    allowed = ManifestFolder(folder, allow_symlinks=True).scan()
    assert sorted(m.pod.name for m in allowed.pods) == ["inner", "trainer"] and not allowed.errors


@pytest.mark.parametrize(
    "content",
    [b"kind: Pod\n  - : [", b"a: 1\n\tb: 2\n", b"key: 'unclosed\n", b"- a\nb: c\n", b"a: *nowhere\n"],
)
def test_yaml_errors_are_the_pure_loaders_words_whichever_loader_read_first(content: bytes) -> None:
    # libyaml (when PyYAML has it) reads manifests; what a bad one reports is still the pure loader's.
    with pytest.raises(yaml.MarkedYAMLError) as pure:
        list(yaml.load_all(content.decode(), Loader=yaml.SafeLoader))
    with pytest.raises(ManifestError) as reported:
        parse_manifest("bad.yaml", content)
    mark = pure.value.problem_mark
    assert mark is not None
    where = (
        "the end of the file"
        if mark.index == len(content)
        else f"line {mark.line + 1}, column {mark.column + 1}"
    )
    assert str(reported.value).startswith(f"YAML error at {where}: {pure.value.problem}")


def test_both_yaml_loaders_read_a_manifest_alike() -> None:
    fast = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert list(yaml.load_all(GOOD.decode(), Loader=fast)) == list(
        yaml.load_all(GOOD.decode(), Loader=yaml.SafeLoader)
    )


def test_a_scan_of_named_files_reads_only_those_and_reports_the_gone(tmp_path: Path) -> None:
    folder = ManifestFolder(tmp_path)
    (tmp_path / "a.yaml").write_bytes(GOOD)
    [a] = folder.scan().pods
    other = GOOD.replace(b"name: trainer", b"name: other")
    (tmp_path / "b.yaml").write_bytes(other)
    (tmp_path / "c.yaml").write_bytes(b"kind: [")  # not named: not read
    result = folder.scan([a.uid], names=["b.yaml", ".b.yaml.tmp", "notes.txt"])
    assert result.covered == frozenset({"b.yaml"})
    assert [m.pod.name for m in result.pods] == ["other"] and result.errors == {}
    (tmp_path / "b.yaml").unlink()
    gone = folder.scan([a.uid], names=["b.yaml"])
    assert gone.covered == frozenset({"b.yaml"}) and gone.pods == [] and gone.errors == {}
    assert [m.pod.name for m in folder.scan([a.uid]).pods] == ["trainer"]  # a full scan sees c.yaml too
    assert "YAML error" in folder.scan([a.uid]).errors["c.yaml"]


def test_a_file_refused_for_a_clash_is_looked_at_again_until_the_clash_is_gone(tmp_path: Path) -> None:
    folder = ManifestFolder(tmp_path)
    (tmp_path / "b.yaml").write_bytes(GOOD)
    [known] = folder.scan().pods
    (tmp_path / "a.yaml").write_bytes(GOOD + b"# same pod name, other file\n")
    clash = folder.scan([known.uid], names=["a.yaml"])
    assert clash.pods == [] and "already defined by b.yaml" in clash.errors["a.yaml"]
    (tmp_path / "b.yaml").unlink()
    # Only b.yaml was reported; a.yaml comes along because it was refused for a clash.
    after = folder.scan([known.uid], names=["b.yaml"])
    assert after.covered == frozenset({"a.yaml", "b.yaml"})
    assert [m.file for m in after.pods] == ["a.yaml"] and after.errors == {}
