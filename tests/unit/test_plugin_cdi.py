"""CDI spec files: round-trip through real files, atomic write, removal, and one-line rejections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubedevice.plugin.cdi import (
    CDIDevice,
    CDIError,
    CDISpec,
    ContainerEdits,
    DeviceNode,
    Hook,
    Mount,
    defined_devices,
    parse_qualified_name,
    read_spec,
    remove_spec,
    write_spec,
)


def _spec() -> CDISpec:
    return CDISpec(
        kind="example.com/gpu",
        devices=(
            CDIDevice("gpu0", ContainerEdits(device_nodes=(DeviceNode("/dev/gpu0", permissions="rw"),))),
            CDIDevice("gpu1", ContainerEdits(env=("GPU=1",))),
        ),
        edits=ContainerEdits(
            env=("VENDOR=example",),
            mounts=(Mount("/usr/lib/gpu", "/usr/lib/gpu", ("ro", "bind")),),
            hooks=(Hook("createContainer", "/usr/bin/gpu-hook", ("gpu-hook", "update")),),
        ),
    )


def test_spec_round_trips_through_a_file_and_is_removed(tmp_path: Path) -> None:
    spec = _spec()
    path = write_spec(spec, tmp_path)
    assert path == tmp_path / "example.com-gpu.json"
    data = json.loads(path.read_text())
    assert data["cdiVersion"] == "0.6.0" and data["kind"] == "example.com/gpu"
    assert [d["name"] for d in data["devices"]] == ["gpu0", "gpu1"]
    assert data["devices"][0]["containerEdits"]["deviceNodes"] == [{"path": "/dev/gpu0", "permissions": "rw"}]
    assert read_spec(path) == spec
    assert [p.name for p in tmp_path.iterdir()] == ["example.com-gpu.json"]  # no temp file left
    assert spec.qualified_name("gpu1") == "example.com/gpu=gpu1"
    assert defined_devices((tmp_path, tmp_path / "absent")) == {
        "example.com/gpu=gpu0",
        "example.com/gpu=gpu1",
    }
    remove_spec(spec, tmp_path)
    remove_spec(spec, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: CDISpec("examplegpu", (CDIDevice("a"),)), "is not vendor/class"),
        (lambda: CDISpec("-bad.com/gpu", (CDIDevice("a"),)), "CDI vendor '-bad.com'"),
        (lambda: CDISpec("example.com/g.pu", (CDIDevice("a"),)), "CDI class 'g.pu'"),
        (lambda: CDISpec("example.com/gpu", (CDIDevice("gpu 0"),)), "CDI device name 'gpu 0'"),
        (lambda: CDISpec("example.com/gpu", (CDIDevice("a"), CDIDevice("a"))), "defined twice"),
        (lambda: CDISpec("example.com/gpu", ()), "defines no device"),
        (lambda: CDISpec("example.com/gpu", (CDIDevice("a"),), cdi_version="9.9"), "cdiVersion '9.9'"),
        (
            lambda: CDISpec(
                "example.com/gpu", (CDIDevice("a", ContainerEdits(device_nodes=(DeviceNode("dev"),))),)
            ),
            "is not absolute",
        ),
        (
            lambda: CDISpec("example.com/gpu", (CDIDevice("a", ContainerEdits(env=("NOVALUE",))),)),
            "not NAME=value",
        ),
        (
            lambda: CDISpec(
                "example.com/gpu", (CDIDevice("a", ContainerEdits(hooks=(Hook("later", "/bin/x"),))),)
            ),
            "CDI hook 'later'",
        ),
        (lambda: _spec().qualified_name("gpu9"), "is not defined"),
        (lambda: parse_qualified_name("example.com/gpu"), "not fully qualified"),
    ],
)
def test_invalid_specs_and_names_are_refused_in_one_line(build: object, message: str) -> None:
    with pytest.raises(CDIError, match=message) as caught:
        build()  # type: ignore[operator]
    assert "\n" not in str(caught.value)


def test_a_broken_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"kind": "example.com/gpu"}')
    with pytest.raises(CDIError, match=r"bad\.json: not a CDI spec"):
        read_spec(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CDIError, match=r"bad\.json: cannot read a CDI spec"):
        read_spec(tmp_path / "bad.json")
    assert parse_qualified_name("example.com/gpu=gpu0") == ("example.com/gpu", "gpu0")
    assert defined_devices((tmp_path,)) == set()
