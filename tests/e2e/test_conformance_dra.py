"""`kubedevice conformance` against DRA drivers: the SDK's fake driver (alone and beside its device plugin
face) passes, and each broken driver in tests/conformance_plugins/dra is caught on the check it breaks."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.test_conformance_cli import CHECKS, KUBEDEVICE, PLUGINS, Run

DRA_CHECKS = (
    "dra-registration",
    "dra-slices",
    "dra-prepare",
    "dra-idempotent",
    "dra-cdi",
    "dra-unprepare",
    "dra-claim-errors",
    "dra-reregistration",
)
FLAGS = ("--json", "--timeout", "8", "--restarts", "1", "--absence", "0.5", "--numa-nodes", "1")


def conformance(*args: str) -> Run:
    out = subprocess.run([KUBEDEVICE, "conformance", *args], capture_output=True, text=True, timeout=150)
    return Run(out.returncode, out.stdout, out.stderr)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Run]:
    junit = tmp_path_factory.mktemp("junit") / "report.xml"

    plugin = [KUBEDEVICE, "plugin", "fake", "--driver", "gpu.example.com", "--devices", "2"]

    def fake(cdi: str) -> list[str]:
        return [*FLAGS, "--cdi-spec-dir", cdi, "--", *plugin, "--cdi-spec-dir", cdi]

    def script(name: str, cdi: str) -> list[str]:
        return ["--cdi-spec-dir", cdi, "--", sys.executable, str(PLUGINS / "dra" / f"{name}.py"), cdi]

    # A folder each: a driver removes its CDI spec when it stops, and the runs overlap.
    cdi = {name: str(tmp_path_factory.mktemp(name)) for name in ("a", "b", "c", "d", "e")}
    cases = {
        # The kubelet folder from $KUBEDEVICE_KUBELET_DIR, which the fake plugin reads.
        "fake-dra": [*fake(cdi["a"]), "--api", "dra"],
        # ... or from {kubelet_dir} in the command.
        "fake-both": [
            *fake(cdi["b"]),
            *("--resource", "example.com/fake", "--api", "both", "--kubelet-dir", "{kubelet_dir}"),
        ],
        # No CDI folder named anywhere: the driver writes into the checker's kubelet folder, which it reads.
        "fake-dra-kubelet-cdi": [*FLAGS, "--", *plugin],
        # The features of 1.37: counter sets in a slice of their own, shared devices, taints, an unhealthy
        # device published with the health taint.
        "fake-dra-features": [
            *fake(cdi["e"]),
            *("--partitions", "2", "--shared", "--taint", "example.com/maintenance:NoSchedule@gpu-1-full"),
            *("--unhealthy", "gpu-1-partition-0", "--health-taint", "kubedevice.io/unhealthy:NoExecute"),
        ],
        "forgets_prepared": [*FLAGS, "--junit-xml", str(junit), *script("forgets_prepared", cdi["c"])],
        "v1beta1_only": [*FLAGS, *script("v1beta1_only", cdi["d"])],
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(cases, pool.map(lambda args: conformance(*args), cases.values()), strict=True))
    results["junit"] = Run(0, junit.read_text(), "")
    return results


def failures(run: Run) -> dict[str, str]:
    return {name: detail for name, (result, detail) in run.rows.items() if result == "FAIL"}


def test_the_fake_dra_driver_passes_every_dra_check(runs: Mapping[str, Run]) -> None:
    run = runs["fake-dra"]
    assert tuple(run.rows) == (*DRA_CHECKS, "plugin-process"), run.stdout
    assert {result for result, _ in run.rows.values()} == {"PASS"}, run.stdout
    assert run.returncode == 0 and run.report["passed"] is True
    rows = run.rows
    assert 'registered "gpu.example.com"' in rows["dra-registration"][1]
    assert "services v1.DRAPlugin, v1beta1.DRAPlugin, v1.DRAResourceHealth" in rows["dra-registration"][1]
    assert rows["dra-slices"][1] == (
        "2 devices published in pool 'kubedevice-conformance'; "
        "every published device is HEALTHY in the health stream"
    )
    assert "CDI devices ['gpu.example.com/gpu=gpu-0']" in rows["dra-prepare"][1]
    assert "1 CDI device defined by specs in " in rows["dra-cdi"][1]
    assert "the bad claim alone failed: claim default/conformance-3: device " in rows["dra-claim-errors"][1]
    assert "registered again" in rows["dra-reregistration"][1]
    assert "Traceback" not in run.stderr and run.stderr == ""


def test_the_fake_with_counters_shares_and_taints_publishes_what_the_api_server_takes(
    runs: Mapping[str, Run],
) -> None:
    run = runs["fake-dra-features"]
    assert {result for result, _ in run.rows.values()} == {"PASS"}, run.stdout
    assert run.rows["dra-slices"][1].startswith("6 devices published in pool 'kubedevice-conformance'")


def test_a_driver_given_no_cdi_folder_is_checked_in_the_kubelet_folder_it_writes(
    runs: Mapping[str, Run],
) -> None:
    run = runs["fake-dra-kubelet-cdi"]
    assert {result for result, _ in run.rows.values()} == {"PASS"}, run.stdout
    note = run.rows["dra-cdi"][1]
    assert re.fullmatch(r"1 CDI device defined by specs in /etc/cdi, /var/run/cdi, /tmp/kdc-\w+/cdi", note), (
        note
    )


def test_a_plugin_serving_both_apis_gets_both_sets_of_checks(runs: Mapping[str, Run]) -> None:
    run = runs["fake-both"]
    assert tuple(run.rows) == (*CHECKS[:-1], *DRA_CHECKS, "plugin-process"), run.stdout
    assert {result for result, _ in run.rows.values()} <= {"PASS", "SKIP"}, run.stdout
    assert "1 device, 1 healthy" in run.rows["list-and-watch"][1]  # fake-0 on the device plugin face
    assert "claim allocated gpu-1 prepared" in run.rows["dra-prepare"][1]  # gpu-1 on DRA
    assert run.returncode == 0


def test_a_driver_that_answers_a_second_prepare_differently_fails_that_check(runs: Mapping[str, Run]) -> None:
    run = runs["forgets_prepared"]
    assert list(failures(run)) == ["dra-idempotent"], run.stdout
    assert "a second NodePrepareResources of the same claim answered " in failures(run)["dra-idempotent"]
    assert (
        "the kubelet asks again after its restart and must get the same devices"
        in run.rows["dra-idempotent"][1]
    )
    assert run.returncode == 1 and run.report["passed"] is False
    suite = ET.fromstring(runs["junit"].stdout).find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == [*DRA_CHECKS, "plugin-process"]
    failure = cases["dra-idempotent"].find("failure")
    assert failure is not None and "a second NodePrepareResources" in (failure.get("message") or "")


def test_a_driver_without_v1_fails_registration_and_the_rest_still_runs(runs: Mapping[str, Run]) -> None:
    run = runs["v1beta1_only"]
    assert list(failures(run)) == ["dra-registration"], run.stdout
    assert failures(run)["dra-registration"].startswith(
        "supported_versions ['v1beta1.DRAPlugin', 'v1.DRAResourceHealth', 'v1alpha1.DRAResourceHealth'] "
        'lack "v1.DRAPlugin": kubelets from 1.34 on call v1'
    )
    assert run.rows["dra-prepare"][0] == "PASS"  # the kubelet still takes v1beta1 and prepares through it
    assert run.returncode == 1
