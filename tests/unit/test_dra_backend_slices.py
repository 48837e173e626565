"""ResourceSlice content from a DRA driver's devices: names, attributes, capacity, the 128 split."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml

from kubedevice.plugin.dra.backend import slice_file
from kubedevice.plugin.dra.backend.slices import (
    SliceContentError,
    attribute_value,
    body_key,
    device_json,
    device_name,
    pool_content,
    standalone_slices,
)
from kubedevice.plugin.dra.backend_api import PublishedDevice

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dev(device_id: str, **kw: object) -> PublishedDevice:
    return PublishedDevice(
        id=device_id,
        attributes=kw.get("attributes", {}),  # type: ignore[arg-type]
        capacity=kw.get("capacity", {}),  # type: ignore[arg-type]
        numa_nodes=kw.get("numa_nodes", ()),  # type: ignore[arg-type]
    )


def hex16(device_id: str) -> str:
    return hashlib.sha256(device_id.encode()).hexdigest()[:16]


@pytest.mark.parametrize("device_id", ["gpu-0", "0", "a", "x" * 63, "nvidia0", "a-b-c"])
def test_an_id_that_is_a_dns_label_is_the_name(device_id: str) -> None:
    assert device_name(device_id) == device_id


@pytest.mark.parametrize(
    ("device_id", "stem"),
    [
        ("GPU-0", "gpu-0"),
        ("GPU-8f3a2b1c-0000-1111-2222-333344445555", "gpu-8f3a2b1c-0000-1111-2222-333344445555"),
        ("0000:3b:00.0", "0000-3b-00-0"),
        ("/dev/nvidia0", "dev-nvidia0"),
        ("-gpu-", "gpu"),
        ("a__b..c", "a-b-c"),
        ("x" * 64, "x" * 46),
        ("ünïcode", "n-code"),
    ],
)
def test_other_ids_are_sanitised_and_hashed(device_id: str, stem: str) -> None:
    name = device_name(device_id)
    assert name == f"{stem}-{hex16(device_id)}"
    assert DNS_LABEL.match(name) and len(name) <= 63


@pytest.mark.parametrize("device_id", ["", "---", "!!!", "ÄÖÜ"])
def test_an_id_with_nothing_left_becomes_d_and_its_hash(device_id: str) -> None:
    assert device_name(device_id) == f"d-{hex16(device_id)}"


def test_a_cut_never_leaves_a_dash_before_the_hash() -> None:
    device_id = "a" * 45 + "-" + "b" * 30
    name = device_name(device_id)
    assert name == "a" * 45 + "-" + hex16(device_id)
    assert "--" not in name


def test_ids_that_sanitise_alike_get_distinct_names() -> None:
    ids = ["a.b", "a_b", "A-B", "a b", "a/b"]
    names = {device_name(i) for i in ids}
    assert len(names) == len(ids)
    assert all(n.startswith("a-b-") for n in names)


@pytest.mark.parametrize(
    ("value", "typed"),
    [
        (True, {"bool": True}),
        (False, {"bool": False}),
        (7, {"int": 7}),
        (0, {"int": 0}),
        ("x1", {"string": "x1"}),
        ("", {"string": ""}),
        ("version:1.2.3", {"version": "1.2.3"}),
        ("version:1.0.0-rc.1+build.5", {"version": "1.0.0-rc.1+build.5"}),
        ("1.2.3", {"string": "1.2.3"}),
    ],
)
def test_attribute_typing(value: str | int | bool, typed: dict[str, object]) -> None:
    assert attribute_value("a", value) == typed


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("version:1.2", 'attribute a: "1.2" is not a semantic version — write version:MAJOR.MINOR.PATCH'),
        ("version:01.2.3", 'attribute a: "01.2.3" is not a semantic version'),
        (2**63, "does not fit the API's 64-bit int"),
        ("s" * 65, "a string of 65 characters (at most 64)"),
        (1.5, "float is not a str, int or bool"),
    ],
)
def test_bad_attribute_values_are_refused(value: object, message: str) -> None:
    with pytest.raises(SliceContentError, match=re.escape(message)):
        attribute_value("a", value)  # type: ignore[arg-type]


def test_device_entry_has_device_id_numa_node_attributes_and_capacity() -> None:
    entry = device_json(
        dev(
            "GPU-0",
            numa_nodes=(1,),
            attributes={
                "model": "x1",
                "index": 0,
                "gpu.example.com/mig": True,
                "driverVersion": "version:2.0.0",
            },
            capacity={"memory": "16Gi"},
        )
    )
    assert entry == {
        "name": f"gpu-0-{hex16('GPU-0')}",
        "attributes": {
            "deviceID": {"string": "GPU-0"},
            "numaNode": {"int": 1},
            "driverVersion": {"version": "2.0.0"},
            "gpu.example.com/mig": {"bool": True},
            "index": {"int": 0},
            "model": {"string": "x1"},
        },
        "capacity": {"memory": {"value": "16Gi"}},
    }


@pytest.mark.parametrize("numa", [(), (0, 1)])
def test_numa_node_only_for_exactly_one_node(numa: tuple[int, ...]) -> None:
    entry = device_json(dev("gpu-0", numa_nodes=numa))
    assert entry == {"name": "gpu-0", "attributes": {"deviceID": {"string": "gpu-0"}}}


@pytest.mark.parametrize(
    ("device", "message"),
    [
        (dev("g", attributes={"deviceID": "x"}), "device g: attribute deviceID is published by the SDK"),
        (dev("g", attributes={"numaNode": 3}), "device g: attribute numaNode is published by the SDK"),
        (dev("g", attributes={"bad-name": 1}), 'device g: attribute name "bad-name" is not valid'),
        (dev("g", attributes={"Bad.Domain/x": 1}), 'attribute name "Bad.Domain/x" is not valid'),
        (dev("g", attributes={"x" * 33: 1}), "is not valid — use a C identifier of at most 32 characters"),
        (dev("g", capacity={"memory": "16 GB"}), 'device g: capacity memory: "16 GB" is not a quantity'),
        (dev("g", capacity={"mem-ory": "1"}), 'capacity name "mem-ory" is not valid'),
        (
            dev("g", attributes={f"a{i}": i for i in range(32)}),
            "33 attributes and 0 capacities: the API allows at most 32 together",
        ),
    ],
)
def test_bad_devices_are_refused_naming_the_device(device: PublishedDevice, message: str) -> None:
    with pytest.raises(SliceContentError, match=re.escape(message)):
        device_json(device)


def test_duplicate_ids_and_name_collisions_are_refused() -> None:
    with pytest.raises(SliceContentError, match="device gpu-0: listed twice"):
        pool_content([dev("gpu-0"), dev("gpu-0")])
    colliding = f"gpu-0-{hex16('GPU-0')}"  # a DNS label equal to another ID's derived name
    with pytest.raises(SliceContentError, match="would both be published as"):
        pool_content([dev("GPU-0"), dev(colliding)])


def test_pool_keeps_the_drivers_order_and_is_cut_at_128() -> None:
    """The driver's order is its preference (upstream's allocator takes the first device that fits)."""
    devices = [dev(f"gpu-{i}") for i in reversed(range(300))]
    content = pool_content(devices)
    assert [len(b["devices"]) for b in content.bodies] == [128, 128, 44]
    names = [e["name"] for body in content.bodies for e in body["devices"]]
    assert names == [f"gpu-{i}" for i in reversed(range(300))]
    assert content == pool_content(devices)  # the same list, the same slices


def test_no_device_is_one_empty_slice() -> None:
    content = pool_content([])
    assert content.slice_count == 1
    docs = standalone_slices(driver="gpu.example.com", node_name="node-1", generation=1, content=content)
    assert [d["spec"]["devices"] for d in docs] == [[]]


def test_standalone_documents() -> None:
    content = pool_content([dev(f"gpu-{i}") for i in range(130)])
    docs = standalone_slices(driver="gpu.example.com", node_name="node-1", generation=4, content=content)
    assert [d["metadata"] for d in docs] == [
        {"name": "node-1-gpu.example.com-0"},
        {"name": "node-1-gpu.example.com-1"},
    ]
    for doc in docs:
        assert doc["apiVersion"] == "resource.k8s.io/v1"
        assert doc["kind"] == "ResourceSlice"
        assert doc["spec"]["driver"] == "gpu.example.com"
        assert doc["spec"]["nodeName"] == "node-1"
        assert doc["spec"]["pool"] == {"name": "node-1", "generation": 4, "resourceSliceCount": 2}
    assert [len(d["spec"]["devices"]) for d in docs] == [128, 2]


def test_slice_file_round_trip_and_generation(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    path = slice_file.slice_file(root, "gpu.example.com")
    assert path == root / "resourceslices" / "gpu.example.com.yaml"
    assert slice_file.read_generation(path) == 0
    content = pool_content([dev("gpu-0"), dev("gpu-1")])
    docs = standalone_slices(driver="gpu.example.com", node_name="node-1", generation=7, content=content)
    slice_file.write(path, slice_file.render("gpu.example.com", docs))
    assert list(yaml.safe_load_all(path.read_text())) == docs
    assert slice_file.read_generation(path) == 7
    assert [p.name for p in path.parent.iterdir()] == ["gpu.example.com.yaml"]  # no temp file left
    path.write_text("::: not yaml [")
    assert slice_file.read_generation(path) == 0


@pytest.mark.parametrize(
    ("a", "b"),
    [("0.5Gi", "512Mi"), ("1", "1000m"), ("1k", "1e3"), ("2E", "2e18"), ("1Ki", "1024"), ("+.5", "500m")],
)
def test_body_key_ignores_how_a_quantity_is_written(a: str, b: str) -> None:
    def body(q: str) -> dict[str, object]:
        return {"devices": [{"name": "g", "capacity": {"m": {"value": q}}}]}

    assert body_key(body(a)) == body_key(body(b))
    assert body_key(body(a)) != body_key(body("3Gi"))


def test_body_key_reads_counters_policies_and_taint_times_as_values() -> None:
    def body(counter: str, default: str, values: list[str], added: str) -> dict[str, object]:
        policy = {"default": default, "validValues": values}
        return {
            "devices": [
                {
                    "name": "g",
                    "capacity": {"m": {"value": "1Gi", "requestPolicy": policy}},
                    "consumesCounters": [{"counterSet": "s", "counters": {"m": {"value": counter}}}],
                    "taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": added}],
                }
            ]
        }

    a = body("0.5Gi", "1024Mi", ["512Mi", "1Gi"], "2026-07-24T10:00:00Z")
    assert body_key(a) == body_key(body("512Mi", "1Gi", ["0.5Gi", "1024Mi"], "2026-07-24T12:00:00+02:00"))
    assert body_key(a) != body_key(body("512Mi", "1Gi", ["0.5Gi", "1024Mi"], "2026-07-24T10:00:01Z"))
