"""The manifest folder's DRA documents: beside the pods, duplicates across files, named scans."""

from pathlib import Path

from kubedevice.node.manifest_folder import ManifestFolder

NS = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml, labels: {team: a}}\n"
TEMPLATE = (
    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: gpu, namespace: ml}\n"
    "spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}}\n"
)
POD = (
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
    "spec:\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]\n"
    "  containers: [{name: c, resources: {claims: [{name: gpu}]}}]\n"
)


def claim(name: str, cls: str = "gpu") -> str:
    return (
        f"apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {{name: {name}}}\n"
        f"spec: {{devices: {{requests: [{{name: r, deviceClassName: {cls}}}]}}}}\n"
    )


def device_class(name: str, extended: str) -> str:
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: {name}}}\n"
        f"spec: {{extendedResourceName: {extended}}}\n"
    )


def test_one_file_with_a_namespace_a_template_and_a_pod_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "demo.yaml").write_text(NS + "---\n" + TEMPLATE + "---\n" + POD)
    result = ManifestFolder(tmp_path).scan()
    assert result.errors == {} and result.dra_changed
    assert [m.pod.name for m in result.pods] == ["p"]
    assert result.dra.namespaces["ml"].meta.labels == {"team": "a"}
    assert list(result.dra.templates) == ["ml/gpu"] and result.dra.claims == {} and result.dra.classes == {}
    assert result.dra.templates["ml/gpu"].meta.source == "demo.yaml"


def test_the_dra_documents_are_the_whole_folders_and_kept_when_nothing_changed(tmp_path: Path) -> None:
    folder = ManifestFolder(tmp_path)
    (tmp_path / "a.yaml").write_text(claim("c1"))
    (tmp_path / "pods.yaml").write_text(POD.replace("namespace: ml", "namespace: default"))
    first = folder.scan()
    assert list(first.dra.claims) == ["default/c1"] and first.dra_changed
    (tmp_path / "b.yaml").write_text(claim("c2"))
    named = folder.scan(names=["b.yaml"])
    assert named.covered == frozenset({"b.yaml"}) and named.pods == []
    assert list(named.dra.claims) == ["default/c1", "default/c2"] and named.dra_changed
    (tmp_path / "pods.yaml").write_text(POD.replace("namespace: ml", "namespace: default") + "# edit\n")
    same = folder.scan(names=["pods.yaml"])
    assert same.dra is named.dra and not same.dra_changed  # a pod-only file: the documents are the same
    (tmp_path / "a.yaml").unlink()
    gone = folder.scan(names=["a.yaml"])
    assert list(gone.dra.claims) == ["default/c2"] and gone.dra_changed
    (tmp_path / "b.yaml").write_text("kind: [")
    broken = folder.scan()
    assert broken.dra.claims == {} and "YAML error" in broken.dra.errors["b.yaml"]


def test_a_document_in_two_files_keeps_the_first_in_name_order(tmp_path: Path) -> None:
    folder = ManifestFolder(tmp_path)
    (tmp_path / "b.yaml").write_text(claim("c1", "from-b") + "---\n" + POD)
    first = folder.scan()
    assert first.dra.claims["default/c1"].meta.source == "b.yaml" and [m.file for m in first.pods] == [
        "b.yaml"
    ]
    (tmp_path / "a.yaml").write_text(claim("c1", "from-a"))
    clash = folder.scan(names=["a.yaml"])
    # b.yaml loses although it came first: it is refused, pods included, and this scan covers it.
    assert clash.covered == frozenset({"a.yaml", "b.yaml"}) and clash.pods == []
    assert clash.errors == {"b.yaml": "ResourceClaim default/c1 is already defined by a.yaml"}
    assert clash.dra.claims["default/c1"].meta.source == "a.yaml" and clash.dra.errors == clash.errors
    (tmp_path / "a.yaml").unlink()
    healed = folder.scan(names=["a.yaml"])
    assert healed.covered == frozenset({"a.yaml", "b.yaml"}) and healed.errors == {}
    assert [m.file for m in healed.pods] == ["b.yaml"]
    assert healed.dra.claims["default/c1"].meta.source == "b.yaml" and healed.dra.errors == {}


def test_two_classes_may_not_map_one_extended_resource(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(device_class("gpu", "example.com/gpu"))
    (tmp_path / "b.yaml").write_text(device_class("other", "example.com/gpu"))
    result = ManifestFolder(tmp_path).scan()
    assert list(result.dra.classes) == ["gpu"]
    assert result.errors == {
        "b.yaml": "extendedResourceName example.com/gpu (DeviceClass other) is already defined by a.yaml"
    }


def test_a_pod_clash_refuses_the_files_dra_documents_too(tmp_path: Path) -> None:
    pod = POD.replace("namespace: ml", "namespace: default")
    (tmp_path / "a.yaml").write_text(pod)
    (tmp_path / "b.yaml").write_text(pod + "---\n" + claim("c9"))
    result = ManifestFolder(tmp_path).scan()
    assert "pod default/p" in result.errors["b.yaml"] and result.dra.claims == {}


def test_selectors_are_compiled_by_the_folders_compiler(tmp_path: Path) -> None:
    class Refuse:
        def compile(self, expression: str) -> None:
            from kubedevice.resource.model import SelectorCompileError

            raise SelectorCompileError(f"no: {expression}")

    (tmp_path / "c.yaml").write_text(
        claim("c1").replace(
            "deviceClassName: gpu}", "deviceClassName: gpu, selectors: [{cel: {expression: x}}]}"
        )
    )
    assert ManifestFolder(tmp_path).scan().errors == {}
    refused = ManifestFolder(tmp_path, selector_compiler=Refuse()).scan()
    assert refused.errors == {
        "c.yaml": "ResourceClaim default/c1: spec.devices.requests[0].selectors[0].cel.expression: "
        "CEL compile error: no: x"
    }


def test_named_scans_keep_the_same_documents_as_a_fresh_full_scan(tmp_path: Path) -> None:
    """The index is kept in step file by file; after every change it must agree with reading it all anew."""
    import random

    rng = random.Random(7)
    folder = ManifestFolder(tmp_path)
    folder.scan()
    files = [f"{c}.yaml" for c in "abcde"]
    clashes = 0
    for _ in range(80):
        name = rng.choice(files)
        path = tmp_path / name
        action = rng.random()
        if action < 0.2:
            path.unlink(missing_ok=True)
        elif action < 0.3:
            path.write_text("kind: [")
        else:
            claims = rng.sample(["c1", "c2", "c3", "c4"], rng.randint(1, 2))
            docs = [claim(c, name[0]) for c in claims]
            if rng.random() < 0.3:
                docs.append(device_class(f"cls-{name[0]}", rng.choice(["example.com/a", "example.com/b"])))
            path.write_text("---\n".join(docs))
        named = folder.scan(names=[name])
        fresh = ManifestFolder(tmp_path).scan()
        assert {k: d.meta.source for k, d in named.dra.claims.items()} == {
            k: d.meta.source for k, d in fresh.dra.claims.items()
        }
        assert set(named.dra.classes) == set(fresh.dra.classes)
        assert named.dra.errors == fresh.dra.errors == fresh.errors
        clashes += any("already defined" in e for e in fresh.errors.values())
    assert clashes > 10  # the walk did meet clashes


def test_a_class_is_found_by_its_extended_resource_or_the_implicit_name(tmp_path: Path) -> None:
    (tmp_path / "classes.yaml").write_text(device_class("gpu", "example.com/gpu"))
    dra = ManifestFolder(tmp_path).scan().dra
    assert dra.class_for("example.com/gpu") is dra.classes["gpu"]
    assert dra.class_for("deviceclass.resource.kubernetes.io/gpu") is dra.classes["gpu"]
    assert dra.class_for("example.com/nic") is None
    assert dra.class_for("deviceclass.resource.kubernetes.io/nic") is None
