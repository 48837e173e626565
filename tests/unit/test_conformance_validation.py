"""The conformance checker's pure rules and its report, on plain messages."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.conformance.checks import RpcProbe, options_check
from kubedevice.conformance.report import Findings, Report, Result, not_run, skipped
from kubedevice.conformance.validation import (
    cdi_name_problem,
    container_response_problems,
    device_list_problems,
    env_name_problem,
    preferred_allocation_problems,
)


@pytest.mark.parametrize(
    "name",
    [
        "nvidia.com/gpu=0",
        "vendor.com/gpu=gpudevice1",
        "a/b=c",
        "ex-ample.com/class_x=dev:0.1",
        "V.io/Cls=all",
    ],
)
def test_fully_qualified_cdi_names_pass(name: str) -> None:
    assert cdi_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("gpu0", "not fully qualified"),
        ("vendor.com/gpu", "not fully qualified"),
        ("vendor.com=gpu0", "not fully qualified"),
        ("/gpu=0", "not fully qualified"),
        ("vendor.com/gpu=", "not fully qualified"),
        ("1vendor.com/gpu=0", "CDI vendor '1vendor.com' in kind"),
        ("vendor.com-/gpu=0", "CDI vendor 'vendor.com-' in kind"),
        ("vendor.com/gpu/x=0", "CDI class 'gpu/x' in kind"),
        ("vendor.com/_gpu=0", "CDI class '_gpu' in kind"),
        ("vendor.com/gpu=-0", "CDI device name '-0' is invalid"),
        ("vendor.com/gpu=a b", "CDI device name 'a b' is invalid"),
    ],
)
def test_bad_cdi_names_say_what_is_wrong(name: str, why: str) -> None:
    problem = cdi_name_problem(name)
    assert problem is not None and why in problem and name in problem


def test_env_names() -> None:
    assert env_name_problem("NVIDIA_VISIBLE_DEVICES") is None
    assert env_name_problem("_x9") is None
    dashed = env_name_problem("MY-VAR")
    assert dashed is not None and dashed[0] is False and "portable" in dashed[1]
    for fatal_name in ("", "A=B", "A\x00B", "9\n"):
        problem = env_name_problem(fatal_name)
        assert problem is not None and problem[0] is True, fatal_name


def test_a_clean_device_list_has_no_problems() -> None:
    devices = [dp.Device(ID="a", health="Healthy"), dp.Device(ID="b", health="Unhealthy")]
    problems = device_list_problems(devices)
    assert problems.failures == [] and problems.warnings == []


def test_device_list_problems() -> None:
    devices = [
        dp.Device(ID="a", health="Healthy"),
        dp.Device(ID="a", health="Unhealthy"),
        dp.Device(ID="", health="Healthy"),
        dp.Device(ID="x" * 64, health="healthy"),
    ]
    problems = device_list_problems(devices)
    assert any("duplicate device IDs [a]" in failure for failure in problems.failures)
    assert any("1 device has an empty ID" in failure for failure in problems.failures)
    assert any("'healthy'" in warning and "unhealthy" in warning for warning in problems.warnings)
    assert any("longer than 63" in warning for warning in problems.warnings)


def test_a_good_container_response_has_no_problems() -> None:
    response = dp.ContainerAllocateResponse(
        envs={"GPU": "0"},
        devices=[dp.DeviceSpec(container_path="/dev/gpu0", host_path="/dev/gpu0", permissions="rwm")],
        mounts=[dp.Mount(container_path="/usr/lib/gpu", host_path="/opt/gpu/lib", read_only=True)],
        cdi_devices=[dp.CDIDevice(name="example.com/gpu=0")],
    )
    problems = container_response_problems(response)
    assert problems.failures == [] and problems.warnings == []


def test_container_response_problems_name_the_field() -> None:
    response = dp.ContainerAllocateResponse(
        envs={"MY-VAR": "1", "A=B": "2"},
        devices=[
            dp.DeviceSpec(container_path="dev/gpu0", host_path="/dev/gpu0", permissions="rw"),
            dp.DeviceSpec(container_path="/dev/gpu1", host_path="gpu1", permissions="rwx"),
            dp.DeviceSpec(container_path="/dev/gpu2", host_path="/dev/gpu2", permissions=""),
        ],
        mounts=[dp.Mount(container_path="lib", host_path="/opt/lib")],
        cdi_devices=[dp.CDIDevice(name="gpu0")],
    )
    problems = container_response_problems(response)
    text = "\n".join(problems.failures)
    assert "'dev/gpu0': container_path must be absolute" in text
    assert "'gpu1' -> '/dev/gpu1': host_path must be absolute" in text
    assert "permissions 'rwx'" in text and "permissions ''" in text
    assert "mount '/opt/lib' -> 'lib': container_path must be absolute" in text
    assert "CDI device 'gpu0' is not fully qualified" in text
    assert "'A=B' cannot be set" in text
    assert problems.warnings == ["env name 'MY-VAR' is not a portable name ([A-Za-z_][A-Za-z0-9_]*)"]


def test_preferred_allocation_problems() -> None:
    request = dp.ContainerPreferredAllocationRequest(
        available_deviceIDs=["a", "b", "c", "d"], must_include_deviceIDs=["d"], allocation_size=2
    )
    assert preferred_allocation_problems(request, ["d", "a"]) == []
    ignored = preferred_allocation_problems(request, ["a", "b"])
    assert ignored == ["answer leaves out must_include [d]"]
    wrong = preferred_allocation_problems(request, ["d", "d", "z"])
    assert "answer repeats [d]" in wrong
    assert "answer holds [z], which were not available" in wrong
    assert "answer has 3 devices, 2 were requested" in wrong


def test_findings_take_the_worst_result_and_list_failures_first() -> None:
    findings = Findings("allocate")
    findings.note("a note")
    assert findings.result().result is Result.PASS
    findings.warn("a warning")
    assert findings.result().result is Result.WARN
    findings.fail("a failure")
    row = findings.result()
    assert row.result is Result.FAIL
    assert row.detail == "a failure; a warning; a note"


def test_findings_cap_long_lists_and_drop_repeats() -> None:
    findings = Findings("list-and-watch")
    for index in range(7):
        findings.fail(f"problem {index}")
    findings.fail("problem 0")
    detail = findings.result().detail
    assert detail.count("problem 0") == 1
    assert "problem 3" in detail and "problem 4" not in detail
    assert "and 3 more failures" in detail


def test_skipped_and_not_run_rows() -> None:
    assert skipped("pre-start", "not required").result is Result.SKIP
    row = not_run("allocate", "the plugin did not register")
    assert row.result is Result.SKIP and row.detail == "not run: the plugin did not register"


def test_report_json_and_verdict() -> None:
    passing = Report((skipped("pre-start", "not required"), Findings("allocate").result()))
    assert passing.passed
    document = json.loads(passing.to_json())
    assert document == {
        "checks": [
            {"name": "pre-start", "result": "SKIP", "detail": "not required"},
            {"name": "allocate", "result": "PASS", "detail": ""},
        ],
        "passed": True,
    }
    cause = Findings("registration")
    cause.fail("no Register call")
    failing = Report((cause.result(), not_run("allocate", "x")), log_tail=("boom",))
    document = json.loads(failing.to_json())
    assert document["passed"] is False and document["log_tail"] == ["boom"]


def test_table_shows_plugin_data_verbatim() -> None:
    findings = Findings("list-and-watch")
    findings.fail("duplicate device IDs [dev-1]")
    out = io.StringIO()
    Report((findings.result(),), log_tail=("[bold]not markup[/bold]",)).print_table(
        Console(file=out, width=200, color_system=None)
    )
    text = out.getvalue()
    assert "duplicate device IDs [dev-1]" in text
    assert "[bold]not markup[/bold]" in text
    assert "FAILED" in text


def test_options_check_compares_registered_and_served_options() -> None:
    served = dp.DevicePluginOptions(get_preferred_allocation_available=True)
    row = options_check(dp.DevicePluginOptions(), served, RpcProbe(True), None)
    assert row.result is Result.WARN
    assert (
        "RegisterRequest.options (pre_start_required=False, get_preferred_allocation_available=False)"
        in row.detail
    )
    assert "GetPreferredAllocation advertised and answers" in row.detail
    assert options_check(served, served, RpcProbe(True), None).result is Result.PASS


def test_options_check_fails_an_advertised_rpc_that_does_not_answer() -> None:
    served = dp.DevicePluginOptions(get_preferred_allocation_available=True, pre_start_required=True)
    row = options_check(served, served, RpcProbe(False, "UNIMPLEMENTED: no"), RpcProbe(True))
    assert row.result is Result.FAIL
    assert row.detail.startswith(
        "get_preferred_allocation_available is set but GetPreferredAllocation fails: UNIMPLEMENTED: no"
    )
    assert "PreStartContainer required and answers" in row.detail
