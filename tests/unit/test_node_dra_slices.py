"""ResourceSlice files: versions, pools and generations, the node filter, left-out features, order."""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.controlplane.slice_pools import gather_slices, parse_slice_file, read_slices
from kubedevice.resource.capacity import DeviceCapacity
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.slice_model import AttributeValue
from kubedevice.scheduler.pools import SliceReport

NODE = "node-1"


def slice_doc(
    name: str,
    devices: list[dict[str, Any]],
    *,
    pool: str = NODE,
    generation: int = 1,
    count: int = 1,
    node: str = NODE,
    version: str = "v1",
    driver: str = "gpu.example.com",
    **spec: Any,
) -> dict[str, Any]:
    where: dict[str, Any] = {"nodeName": node} if node else {}
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            **where,
            "devices": devices,
            **spec,
        },
    }


def gpu(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "model": {"string": "x1"},
            "gpu.example.com/index": {"int": 0},
            "driverVersion": {"version": "1.2.3"},
            "ok": {"bool": True},
        },
        "capacity": {"memory": {"value": "16Gi"}},
        **extra,
    }


def write(folder: Path, name: str, *docs: dict[str, Any]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(yaml.safe_dump_all(docs))


def test_every_version_reads_into_the_same_devices(tmp_path: Path) -> None:
    v1 = slice_doc("s", [gpu("gpu-0")])
    v1beta2 = slice_doc("s", [gpu("gpu-0")], version="v1beta2")
    v1beta1 = slice_doc(
        "s",
        [{"name": "gpu-0", "basic": {k: v for k, v in gpu("gpu-0").items() if k != "name"}}],
        version="v1beta1",
    )
    read = [parse_slice_file("f.yaml", yaml.safe_dump(d).encode()).slices[0] for d in (v1, v1beta2, v1beta1)]
    assert len({s.meta.uid for s in read}) == 3  # the default UID hashes the document as written
    same = [replace(s, meta=replace(s.meta, uid="")) for s in read]
    assert same[0] == same[1] == same[2]
    [device] = read[0].devices
    assert device.attributes == {
        "model": AttributeValue("string", "x1"),
        "gpu.example.com/index": AttributeValue("int", 0),
        "driverVersion": AttributeValue("version", "1.2.3"),
        "ok": AttributeValue("bool", True),
    }
    assert (
        device.capacity == {"memory": DeviceCapacity(Quantity.parse("16Gi"))} and device.unsupported is None
    )
    s = read[0]
    assert (s.driver, s.pool, s.generation, s.slice_count, s.node_name, s.meta.source) == (
        "gpu.example.com",
        NODE,
        1,
        1,
        NODE,
        "f.yaml",
    )


def test_the_sdks_published_file_reads_as_one_complete_pool(tmp_path: Path) -> None:
    from kubedevice.plugin.dra.backend import slice_file, slices
    from kubedevice.plugin.dra.backend_api import PublishedDevice

    devices = [
        PublishedDevice(f"gpu-{i}", {"model": "x1", "fw": "version:1.2.3"}, {"memory": "16Gi"}, (0,))
        for i in range(130)
    ]
    content = slices.pool_content(devices)
    docs = slices.standalone_slices(driver="gpu.example.com", node_name=NODE, generation=3, content=content)
    slice_file.write(
        slice_file.slice_file(tmp_path, "gpu.example.com"), slice_file.render("gpu.example.com", docs)
    )
    scan = read_slices(slice_file.slice_dir(tmp_path), NODE)
    assert scan.errors == () and scan.warnings == ()
    [pool] = scan.pools
    assert (pool.driver, pool.name, pool.generation, pool.complete, len(pool.slices)) == (
        "gpu.example.com",
        NODE,
        3,
        True,
        2,
    )
    assert len(pool.devices) == 130
    assert pool.devices[0].attributes["fw"] == AttributeValue("version", "1.2.3")
    assert pool.devices[0].capacity == {"memory": DeviceCapacity(Quantity.parse("16Gi"))}


def test_pools_count_in_their_highest_generation_when_complete(tmp_path: Path) -> None:
    folder = tmp_path / "resourceslices"
    write(folder, "a.yaml", slice_doc("old", [gpu("gpu-9")], generation=1))
    write(
        folder,
        "b.yaml",
        slice_doc("new-1", [gpu("gpu-2"), gpu("gpu-10"), gpu("gpu-1")], generation=2, count=2),
    )
    scan = read_slices(folder, NODE)
    [pool] = scan.pools
    assert (pool.generation, pool.complete, [s.meta.name for s in pool.slices]) == (2, False, ["new-1"])
    assert [w.message for w in scan.warnings] == [
        "pool gpu.example.com/node-1: 1 of 2 slice(s) of generation 2 published; "
        "its devices wait for the others"
    ]
    write(folder, "c.yaml", slice_doc("new-2", [gpu("gpu-0")], generation=2, count=2))
    scan = read_slices(folder, NODE)
    [pool] = scan.pools
    assert pool.complete and scan.warnings == () and scan.errors == ()
    # Published order: files by name, documents in file order, devices as listed (gpu-10 stays before gpu-1).
    assert [d.name for d in pool.devices] == ["gpu-2", "gpu-10", "gpu-1", "gpu-0"]
    assert [s.meta.name for s in scan.slices] == ["old", "new-1", "new-2"]


def test_pools_are_ordered_by_driver_then_name_as_bytes() -> None:
    docs = [
        slice_doc("s1", [gpu("a")], driver="b.example.com", pool="p"),
        slice_doc("s2", [gpu("a")], driver="a.example.com", pool="z"),
        slice_doc("s3", [gpu("a")], driver="a.example.com", pool="Z"),
    ]
    scan = gather_slices([parse_slice_file("f.yaml", yaml.safe_dump_all(docs).encode())], NODE)
    assert [(p.driver, p.name) for p in scan.pools] == [
        ("a.example.com", "Z"),
        ("a.example.com", "z"),
        ("b.example.com", "p"),
    ]


def test_slices_of_another_node_are_ignored_with_a_warning() -> None:
    docs = [
        slice_doc("mine", [gpu("gpu-0")]),
        slice_doc("theirs", [gpu("gpu-1")], node="node-2", pool="node-2"),
        slice_doc("everyone", [gpu("gpu-2")], node="", allNodes=True, pool="shared"),
        slice_doc("labelled", [gpu("gpu-3")], node="", nodeSelector=_selector("rack", "In", "r1"), pool="l"),
        slice_doc(
            "other-rack", [gpu("gpu-4")], node="", nodeSelector=_selector("rack", "In", "r2"), pool="o"
        ),
    ]
    files = [parse_slice_file("f.yaml", yaml.safe_dump_all(docs).encode())]
    scan = gather_slices(files, NODE, {"rack": "r1", "kubernetes.io/hostname": NODE})
    assert [s.meta.name for s in scan.slices] == ["mine", "everyone", "labelled"]
    assert [s.meta.name for s in scan.ignored] == ["theirs", "other-rack"]
    assert [w.message for w in scan.warnings] == [
        'ResourceSlice theirs: published for node "node-2", this node is "node-1"; ignored',
        'ResourceSlice other-rack: its spec.nodeSelector does not match node "node-1" '
        "(labels: kubernetes.io/hostname=node-1,rack=r1); ignored",
    ]


def _selector(key: str, operator: str, *values: str) -> dict[str, object]:
    requirement = {"key": key, "operator": operator, "values": list(values)}
    return {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        (_selector("rack", "In", "r1", "r2"), {"rack": "r2"}, True),
        (_selector("rack", "NotIn", "r1"), {}, True),
        (_selector("rack", "Exists"), {"rack": ""}, True),
        (_selector("rack", "DoesNotExist"), {"rack": "r1"}, False),
        (_selector("gpus", "Gt", "3"), {"gpus": "4"}, True),
        (_selector("gpus", "Lt", "3"), {"gpus": "x"}, False),
        (
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
                ]
            },
            {},
            True,
        ),
        ({"nodeSelectorTerms": [{}]}, {"rack": "r1"}, False),
    ],
)
def test_node_selectors_match_as_the_scheduler_matches(
    selector: dict[str, object], labels: dict[str, str], matches: bool
) -> None:
    doc = slice_doc("s", [gpu("gpu-0")], node="", nodeSelector=selector)
    [slice_] = parse_slice_file("f.yaml", yaml.safe_dump(doc).encode()).slices
    assert slice_.node_selector is not None
    assert slice_.node_selector.matches(NODE, labels) is matches


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        ({"nodeSelectorTerms": []}, "spec.nodeSelector.nodeSelectorTerms: must have exactly one term, not 0"),
        (
            _selector("rack", "Near", "r1"),
            'spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Near"',
        ),
        (_selector("rack", "In"), "matchExpressions[0].values: must be specified when `operator` is 'In'"),
        (_selector("gpus", "Gt", "many"), "matchExpressions[0].values[0]: 'many' is not an integer"),
        (
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["u"]}]}
                ]
            },
            'matchFields[0].key: Unsupported value: "metadata.uid"',
        ),
    ],
)
def test_bad_node_selectors_are_refused_with_their_field(selector: dict[str, object], error: str) -> None:
    doc = slice_doc("s", [gpu("gpu-0")], node="", nodeSelector=selector)
    result = parse_slice_file("f.yaml", yaml.safe_dump(doc).encode())
    assert not result.slices
    [report] = result.errors
    assert error in report.message


@pytest.mark.parametrize(
    ("spec", "device", "feature", "marked"),
    [
        (
            {},
            {"nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "8"}}}},
            "node allocatable resources",
            ["gpu-9"],
        ),
        (
            {"partitionTypeAttribute": "gpu.example.com/profile"},
            {},
            "partition type attribute",
            ["gpu-0", "gpu-9"],
        ),
        ({"skipNodeOperations": ["*"]}, {}, "optional node operations", ["gpu-0", "gpu-9"]),
    ],
)
def test_left_out_slice_features_are_reported_and_their_devices_marked(
    spec: dict[str, Any], device: dict[str, Any], feature: str, marked: list[str]
) -> None:
    doc = slice_doc("s", [gpu("gpu-0"), {**gpu("gpu-9"), **device}], **spec)
    scan = gather_slices([parse_slice_file("f.yaml", yaml.safe_dump(doc).encode())], NODE)
    assert scan.warnings == (
        SliceReport("f.yaml", "s", f"unsupported by kubedevice: {feature} (ResourceSlice s)"),
    )
    [pool] = scan.pools
    assert [d.name for d in pool.devices if d.unsupported == feature] == marked
    assert [d.name for d in pool.devices if d.unsupported is None] == [
        n for n in ("gpu-0", "gpu-9") if n not in marked
    ]


def test_v1beta1_device_fields_are_read_under_basic() -> None:
    device = {"name": "gpu-9", "basic": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    doc = slice_doc("s", [device], version="v1beta1")
    [s] = parse_slice_file("f.yaml", yaml.safe_dump(doc).encode()).slices
    assert s.devices[0].unsupported is None
    assert [t.text() for t in s.devices[0].taints] == ["k:NoSchedule"]


BAD = [
    (slice_doc("s", [gpu("GPU_0")]), "ResourceSlice s: spec.devices[0].name: 'GPU_0' is not a DNS label"),
    (
        slice_doc("s", [gpu("a"), gpu("a")]),
        "ResourceSlice s: spec.devices[1].name: 'a' is used by another device",
    ),
    (slice_doc("s", [], count=0), "ResourceSlice s: spec.pool.resourceSliceCount: must be at least 1, not 0"),
    (
        slice_doc("s", [], node=""),
        "ResourceSlice s: spec: exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection "
        "must be set",
    ),
    (slice_doc("s", [], driver="Bad"), "ResourceSlice s: spec.driver: 'Bad' is not a DNS subdomain"),
    (
        slice_doc("s", [{"name": "a", "attributes": {"x": {"int": 1, "bool": True}}}]),
        "ResourceSlice s: spec.devices[0].attributes[x]: "
        "must have exactly one of int, bool, string, version, ints, bools, strings or versions",
    ),
    (
        slice_doc("s", [{"name": "a", "attributes": {"x": {"version": "v1"}}}]),
        "ResourceSlice s: spec.devices[0].attributes[x].version: 'v1' is not a semantic version",
    ),
    (
        slice_doc("s", [{"name": "a", "capacity": {"memory": {"value": "lots"}}}]),
        "ResourceSlice s: spec.devices[0].capacity[memory].value: 'lots' is not a quantity",
    ),
    (
        slice_doc("s", [{"name": "a", "attributes": {"bad name": {"int": 1}}}]),
        "ResourceSlice s: spec.devices[0].attributes[bad name]: is not an attribute name",
    ),
    (
        {**slice_doc("s", []), "apiVersion": "resource.k8s.io/v1alpha3"},
        'kind ResourceSlice: apiVersion "resource.k8s.io/v1alpha3" is not supported',
    ),
    (
        {**slice_doc("s", []), "kind": "ResourceClaim"},
        'unsupported kind "ResourceClaim" (apiVersion "resource.k8s.io/v1") — supported: ResourceSlice',
    ),
]


@pytest.mark.parametrize(("doc", "message"), BAD)
def test_a_bad_slice_is_reported_and_ignored_the_rest_kept(doc: dict[str, Any], message: str) -> None:
    good = slice_doc("good", [gpu("gpu-0")])
    f = parse_slice_file("f.yaml", yaml.safe_dump_all([good, doc]).encode())
    assert [s.meta.name for s in f.slices] == ["good"]
    [error] = f.errors
    expected = message if message.startswith("ResourceSlice") else "document 2: " + message
    assert error.message.startswith(expected), error.message


def test_bad_files_and_duplicate_names_are_reported(tmp_path: Path) -> None:
    folder = tmp_path / "resourceslices"
    write(folder, "a.yaml", slice_doc("s", [gpu("gpu-0")]))
    write(folder, "b.yaml", slice_doc("s", [gpu("gpu-1")], pool="other"))
    (folder / "c.yaml").write_text("kind: [")
    (folder / ".tmp.yaml").write_text("kind: [")  # a writer's temporary file: not read
    scan = read_slices(folder, NODE)
    assert [s.meta.source for s in scan.slices] == ["a.yaml"] and [s.meta.source for s in scan.ignored] == [
        "b.yaml"
    ]
    assert [(e.file, e.slice) for e in scan.errors] == [("b.yaml", "s"), ("c.yaml", "")]
    assert scan.errors[0].message == "ResourceSlice s is already defined by a.yaml"
    assert scan.errors[1].message.startswith("YAML error")
    assert read_slices(tmp_path / "missing", NODE).slices == ()


def test_a_device_twice_in_one_generation_makes_the_pool_invalid() -> None:
    docs = [slice_doc("s1", [gpu("a")], count=2), slice_doc("s2", [gpu("a")], count=2)]
    scan = gather_slices([parse_slice_file("f.yaml", yaml.safe_dump_all(docs).encode())], NODE)
    [pool] = scan.pools
    assert pool.invalid == "device a is published twice in generation 1"
    assert (
        scan.warnings[0].message == "pool gpu.example.com/node-1: device a is published twice in generation 1"
    )
