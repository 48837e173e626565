"""The DRA checks' rules on plain data: what GetInfo must say, and what a slice file must hold."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubedevice.conformance.dra_checks import Published, health_disagreement, read_slices, registration_check
from kubedevice.conformance.dra_kubelet import DRARegistration
from kubedevice.conformance.report import Result

V1, V1BETA1, HEALTH = "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth"
REGISTRY = Path("/k/plugins_registry")


def registration(*versions: str, type_: str = "DRAPlugin", refusal: str = "") -> DRARegistration:
    return DRARegistration(
        1.0, type_, "gpu.example.com", "/k/plugins/gpu.example.com/dra.sock", versions, refusal
    )


def check(reg: DRARegistration | None, exit_note: str | None = None) -> tuple[Result, str]:
    row = registration_check(reg, 0.25, 8.0, REGISTRY, exit_note)
    return row.result, row.detail


@pytest.mark.parametrize(
    ("reg", "result", "text"),
    [
        (registration(V1, V1BETA1, HEALTH), Result.PASS, 'registered "gpu.example.com" after 0.25 s'),
        (registration(V1), Result.PASS, "; no health service (the kubelet learns no device health)"),
        (
            registration(V1BETA1),
            Result.FAIL,
            "supported_versions ['v1beta1.DRAPlugin'] lack \"v1.DRAPlugin\"",
        ),
        (
            registration(V1BETA1, V1),
            Result.FAIL,
            'list "v1beta1.DRAPlugin" before "v1.DRAPlugin": the kubelet takes the first it knows',
        ),
        (
            registration(V1, type_="CSIPlugin", refusal="x"),
            Result.FAIL,
            'GetInfo answered type "CSIPlugin": a DRA driver registers as "DRAPlugin"',
        ),
        (
            registration(V1, refusal='invalid DRA driver name "GPU": a lowercase RFC 1123 subdomain'),
            Result.FAIL,
            'the kubelet refused the registration: invalid DRA driver name "GPU"',
        ),
        (None, Result.FAIL, "no registration socket in /k/plugins_registry answered GetInfo within 8 s"),
    ],
)
def test_registration_rules(reg: DRARegistration | None, result: Result, text: str) -> None:
    got, detail = check(reg)
    assert got is result and text in detail, detail


def test_a_driver_that_exited_before_registering_says_so() -> None:
    assert check(None, "exited with code 3") == (
        Result.FAIL,
        "the plugin exited with code 3 before registering",
    )


def slice_doc(
    devices: list[str], *, driver: str = "gpu.example.com", node: str = "n1", pool: str = "n1", count: int = 1
) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-0"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            "devices": [{"name": d} for d in devices],
        },
    }


def write(tmp_path: Path, *documents: object) -> Path:
    path = tmp_path / "gpu.example.com.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return path


def test_a_good_slice_file_reads_as_its_pool_and_devices(tmp_path: Path) -> None:
    path = write(tmp_path, slice_doc(["gpu-0", "gpu-1"], count=2), slice_doc(["gpu-2"], count=2))
    published, problems = read_slices(path, "gpu.example.com", "n1")
    assert (published.pool, published.devices, problems) == ("n1", ("gpu-0", "gpu-1", "gpu-2"), [])


@pytest.mark.parametrize(
    ("documents", "problem"),
    [
        ([{"kind": "ConfigMap"}], "document 1 is not a ResourceSlice"),
        ([slice_doc(["a"], driver="nic.example.com")], "document 1 is for driver 'nic.example.com'"),
        ([slice_doc(["a"], node="other")], "document 1 has nodeName 'other', not the node's 'n1'"),
        ([slice_doc(["a"]), slice_doc(["b"], pool="p2")], "2 pools ['n1', 'p2'] where one pool per node"),
        (
            [slice_doc(["a"]) | {"spec": slice_doc(["a"])["spec"] | {"sharedCounters": []}}],
            'document 1: spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed '
            "(the API server refuses it)",
        ),
        ([slice_doc(["a", "a"])], 'spec.devices[1]: Duplicate value: "a"'),
        (
            [
                slice_doc([])
                | {
                    "spec": slice_doc([])["spec"]
                    | {
                        "devices": [
                            {
                                "name": "p",
                                "consumesCounters": [
                                    {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "1Gi"}}}
                                ],
                            }
                        ]
                    }
                }
            ],
            'counter set "gpu-0-counters" referenced by device "p" not found',
        ),
        ([slice_doc(["a"]), slice_doc(["b"])], "resourceSliceCount ['1'] but 2 slices in the pool"),
    ],
)
def test_a_bad_slice_file_is_named(tmp_path: Path, documents: list[object], problem: str) -> None:
    path = write(tmp_path, *documents)
    _, problems = read_slices(path, "gpu.example.com", "n1")
    assert len(problems) == 1 and problem in problems[0] and problems[0].startswith(str(path)), problems


def test_a_slice_file_that_is_not_yaml_is_named(tmp_path: Path) -> None:
    path = tmp_path / "gpu.example.com.yaml"
    path.write_text("spec: [unclosed\n")
    published, problems = read_slices(path, "gpu.example.com", "n1")
    assert published.devices == () and problems[0].startswith(f"{path} cannot be read: ")


@pytest.mark.parametrize(
    ("health", "text"),
    [
        ({"gpu-0": "Healthy", "gpu-1": "Healthy"}, ""),
        ({}, "the health stream reported no device"),
        ({"gpu-0": "Healthy"}, "published devices [gpu-1] are missing from the health stream"),
        ({"gpu-0": "Healthy", "gpu-1": "Unhealthy"}, "published devices [gpu-1] are not HEALTHY"),
        ({"gpu-0": "Unknown", "gpu-1": "Healthy"}, "published devices [gpu-0] are not HEALTHY"),
    ],
)
def test_published_devices_must_be_healthy(health: dict[str, str], text: str) -> None:
    got = health_disagreement(Published("n1", ("gpu-0", "gpu-1")), health)
    assert (got == "") if not text else got.startswith(text), got


def test_an_unhealthy_device_left_out_of_the_slices_or_tainted_is_fine() -> None:
    health = {"gpu-0": "Healthy", "gpu-1": "Unhealthy"}
    assert health_disagreement(Published("n1", ("gpu-0",)), health) == ""
    assert health_disagreement(Published("n1", ("gpu-0", "gpu-1"), frozenset({"gpu-1"})), health) == ""


def test_a_tainted_device_reads_as_tainted(tmp_path: Path) -> None:
    doc = slice_doc([])
    doc["spec"]["devices"] = [
        {"name": "gpu-0", "taints": [{"key": "k", "effect": "NoExecute"}]},
        {"name": "gpu-1", "taints": [{"key": "k", "effect": "None"}]},
    ]
    published, problems = read_slices(write(tmp_path, doc), "gpu.example.com", "n1")
    assert (published.tainted, problems) == (frozenset({"gpu-0"}), [])
