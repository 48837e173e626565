"""CDI spec files: round trip through real files, atomic write, removal, and one-line rejections."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
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
    check_spec_dir,
    defined_devices,
    parse_qualified_name,
    read_spec,
    remove_spec,
    scan_spec_dirs,
    write_spec,
)

ENV = ContainerEdits(env=("GPU=1",))


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
            hooks=(Hook("createContainer", "/usr/bin/gpu-hook", ("gpu-hook", "update"), ("DEBUG=1",)),),
        ),
    )


def test_spec_round_trips_through_a_file_and_is_removed(tmp_path: Path) -> None:
    spec = _spec()
    path = write_spec(spec, tmp_path / "cdi")
    assert path == tmp_path / "cdi" / "example.com-gpu.json"
    data = json.loads(path.read_text())
    # The field names and shape every CDI consumer reads.
    assert data == {
        "cdiVersion": "0.3.0",
        "kind": "example.com/gpu",
        "devices": [
            {"name": "gpu0", "containerEdits": {"deviceNodes": [{"path": "/dev/gpu0", "permissions": "rw"}]}},
            {"name": "gpu1", "containerEdits": {"env": ["GPU=1"]}},
        ],
        "containerEdits": {
            "env": ["VENDOR=example"],
            "hooks": [
                {
                    "hookName": "createContainer",
                    "path": "/usr/bin/gpu-hook",
                    "args": ["gpu-hook", "update"],
                    "env": ["DEBUG=1"],
                }
            ],
            "mounts": [
                {"hostPath": "/usr/lib/gpu", "containerPath": "/usr/lib/gpu", "options": ["ro", "bind"]}
            ],
        },
    }
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert read_spec(path) == spec
    assert [p.name for p in path.parent.iterdir()] == ["example.com-gpu.json"]  # no temp file left
    assert spec.qualified_name("gpu1") == "example.com/gpu=gpu1"
    assert parse_qualified_name("example.com/gpu=gpu1") == ("example.com/gpu", "gpu1")
    assert spec.qualified_names(["gpu1", "gpu0"]) == ["example.com/gpu=gpu1", "example.com/gpu=gpu0"]
    assert defined_devices((tmp_path / "cdi", tmp_path / "absent")) == {
        "example.com/gpu=gpu0",
        "example.com/gpu=gpu1",
    }
    remove_spec(spec, tmp_path / "cdi")
    remove_spec(spec, tmp_path / "cdi")
    assert list(path.parent.iterdir()) == []


def test_a_yaml_spec_defines_devices_as_a_json_one(tmp_path: Path) -> None:
    (tmp_path / "vendor.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: vendor.com/net\ndevices:\n"
        "  - name: '0'\n    containerEdits:\n      deviceNodes: [{path: /dev/net0, hostPath: /dev/net0}]\n"
    )
    (tmp_path / "notes.txt").write_text("not a spec")
    (tmp_path / ".example.com-gpu.json.1234.tmp").write_text("{")
    assert defined_devices((tmp_path,)) == {"vendor.com/net=0"}


@pytest.mark.parametrize(
    ("spec", "version"),
    [
        (CDISpec("example.com/gpu", (CDIDevice("gpu0", ENV),)), "0.3.0"),
        # A name starting with a digit and a host path came with 0.5.0, a '.' in the class with 0.6.0.
        (CDISpec("example.com/gpu", (CDIDevice("0", ENV),)), "0.5.0"),
        (
            CDISpec(
                "example.com/gpu", (CDIDevice("a", ContainerEdits(device_nodes=(DeviceNode("/d", "/h"),))),)
            ),
            "0.5.0",
        ),
        (CDISpec("example.com/gpu.shared", (CDIDevice("0", ENV),)), "0.6.0"),
        (CDISpec("example.com/gpu", (CDIDevice("gpu0", ENV),), cdi_version="1.1.0"), "1.1.0"),
    ],
)
def test_the_version_is_the_oldest_that_holds_the_spec(spec: CDISpec, version: str) -> None:
    assert spec.cdi_version == version


def _device(edits: ContainerEdits) -> Callable[[], CDISpec]:
    return lambda: CDISpec("example.com/gpu", (CDIDevice("a", edits),))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: CDISpec("examplegpu", (CDIDevice("a", ENV),)), "CDI kind 'examplegpu' is not vendor/class"),
        (lambda: CDISpec("-bad.com/gpu", (CDIDevice("a", ENV),)), "CDI vendor '-bad.com' in kind"),
        (lambda: CDISpec("example.com/gpu-", (CDIDevice("a", ENV),)), "CDI class 'gpu-' in kind"),
        (lambda: CDISpec("example.com/g/pu", (CDIDevice("a", ENV),)), "CDI class 'g/pu'"),
        (
            lambda: CDISpec("example.com/gpu", (CDIDevice("gpu 0", ENV),)),
            "CDI device name 'gpu 0' is invalid",
        ),
        (
            lambda: CDISpec("example.com/gpu", (CDIDevice("gpu0:", ENV),)),
            "CDI device name 'gpu0:' is invalid",
        ),
        (
            lambda: CDISpec("example.com/gpu", (CDIDevice("a", ENV), CDIDevice("a", ENV))),
            "'a' is defined twice",
        ),
        (lambda: CDISpec("example.com/gpu", ()), "defines no device"),
        (
            lambda: CDISpec("example.com/gpu", (CDIDevice("a"),)),
            "CDI device 'a' of kind 'example.com/gpu' edits nothing",
        ),
        (lambda: CDISpec("example.com/gpu", (CDIDevice("a", ENV),), cdi_version="9.9"), "cdiVersion '9.9'"),
        (
            lambda: CDISpec("example.com/g.pu", (CDIDevice("a", ENV),), cdi_version="0.5.0"),
            "cdiVersion 0.5.0 of kind 'example.com/g.pu' is too old for what the spec uses — use 0.6.0",
        ),
        (
            _device(ContainerEdits(device_nodes=(DeviceNode("dev/gpu0"),))),
            "deviceNode path 'dev/gpu0' of device 'a' is not absolute",
        ),
        (_device(ContainerEdits(device_nodes=(DeviceNode("/dev/a", "dev/a"),))), "deviceNode path 'dev/a'"),
        (
            _device(ContainerEdits(device_nodes=(DeviceNode("/dev/a", permissions="rwx"),))),
            "permissions 'rwx'",
        ),
        (
            _device(ContainerEdits(env=("NOVALUE",))),
            "CDI env entry 'NOVALUE' of device 'a' is not NAME=value",
        ),
        (_device(ContainerEdits(env=("=1",))), "CDI env entry '=1'"),
        (
            _device(ContainerEdits(mounts=(Mount("lib", "/lib"),))),
            "CDI mount path 'lib' of device 'a' is not absolute",
        ),
        (_device(ContainerEdits(mounts=(Mount("/lib", "lib"),))), "CDI mount path 'lib'"),
        (
            _device(ContainerEdits(hooks=(Hook("later", "/bin/x"),))),
            "CDI hook 'later' of device 'a' is unknown",
        ),
        (_device(ContainerEdits(hooks=(Hook("poststop", "x"),))), "CDI hook path 'x'"),
        (
            _device(ContainerEdits(hooks=(Hook("poststop", "/x", env=("X",)),))),
            "env entry 'X' of hook 'poststop'",
        ),
        (lambda: _spec().qualified_name("gpu9"), "CDI device 'gpu9' is not defined by the spec"),
        (lambda: parse_qualified_name("example.com/gpu"), "not fully qualified"),
        (lambda: parse_qualified_name("=gpu0"), "not fully qualified"),
        (lambda: parse_qualified_name("example.com/gpu=-0"), "CDI device name '-0'"),
    ],
)
def test_invalid_specs_and_names_are_refused_in_one_line(build: Callable[[], object], message: str) -> None:
    with pytest.raises(CDIError, match=message.replace(".", r"\.").replace("(", r"\(")) as caught:
        build()
    assert "\n" not in str(caught.value) and " — " in str(caught.value)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "bad.json",
            '{"kind": "example.com/gpu"}',
            r"bad\.json: not a CDI spec \(missing or malformed 'devices'\)",
        ),
        ("bad.json", "{", r"bad\.json: not valid JSON \(Expecting property name"),
        ("bad.yaml", "kind: [", r"bad\.yaml: not valid YAML"),
        (
            "bad.json",
            '{"cdiVersion": "0.3.0", "kind": "x", "devices": []}',
            r"bad\.json: CDI kind 'x' is not",
        ),
    ],
)
def test_a_broken_file_is_named_and_defines_nothing(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(CDIError, match=message) as caught:
        read_spec(tmp_path / name)
    assert defined_devices((tmp_path,)) == set()
    assert scan_spec_dirs((tmp_path,)).broken == (str(caught.value),)


def test_a_spec_folder_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    check_spec_dir(tmp_path / "missing" / "cdi")  # created on write
    (tmp_path / "file").write_text("")
    with pytest.raises(CDIError, match=r"cdi: .*file is a file, not a folder — give a folder"):
        check_spec_dir(tmp_path / "file" / "cdi")
