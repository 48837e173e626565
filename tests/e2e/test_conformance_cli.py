"""`kubedevice conformance` as a user runs it: against the SDK's plugins, a correct hand-written plugin,
and one deliberately broken plugin per failure kind, each caught on the check it breaks.

The runs are independent processes with their own temporary directories, so they run a few at a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")
PLUGINS = Path(__file__).resolve().parent.parent / "conformance_plugins"
#: Small, so failing cases end quickly; roomy enough for a loaded 2-core machine.
#: A 2-node machine for the topology check, whatever NUMA nodes the host has.
FLAGS = ("--json", "--timeout", "8", "--restarts", "2", "--absence", "1", "--numa-nodes", "2")
PARALLEL_RUNS = 4
CHECKS = (
    "registration",
    "options",
    "list-and-watch",
    "allocate",
    "preferred-allocation",
    "pre-start",
    "topology",
    "kubelet-restart",
    "kubelet-absence",
    "plugin-process",
)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.stdout)
        return document

    @property
    def rows(self) -> dict[str, tuple[str, str]]:
        return {row["name"]: (row["result"], row["detail"]) for row in self.report["checks"]}


def conformance(*args: str) -> Run:
    out = subprocess.run([KUBEDEVICE, "conformance", *args], capture_output=True, text=True, timeout=150)
    return Run(out.returncode, out.stdout, out.stderr)


def script(name: str) -> list[str]:
    return [sys.executable, str(PLUGINS / f"{name}.py"), "{plugin_dir}"]


def cases(device_glob: str, cdi_dir: str) -> dict[str, list[str]]:
    fake = [KUBEDEVICE, "plugin", "fake", "--resource", "example.com/fake", "--devices", "4"]
    plugin_dir = ["--plugin-dir", "{plugin_dir}"]
    runs = {
        "sdk-fake": [*FLAGS, "--", *fake, *plugin_dir],
        # The checker looks for the CDI names where the plugin writes its spec.
        "sdk-fake-all-options": [
            *FLAGS,
            *["--cdi-spec-dir", "/etc/cdi", "--cdi-spec-dir", cdi_dir],
            "--",
            *fake,
            "--numa-nodes",
            "2",
            "--preferred",
            "--prestart",
            *["--cdi", "--cdi-spec-dir", cdi_dir],
            *plugin_dir,
        ],
        "sdk-fake-shared": [
            *FLAGS,
            "--",
            *fake,
            *("--replicas", "3", "--refuse-multiple", "--numa-nodes", "2", "--prestart", *plugin_dir),
        ],
        "sdk-paths": [
            *FLAGS,
            "--",
            *[KUBEDEVICE, "plugin", "paths", "--resource", "example.com/serial", "--glob", device_glob],
            *["--count", "2", *plugin_dir],
        ],
        # No `--` and no {plugin_dir}: options end at the command, the plugin reads $KUBEDEVICE_PLUGIN_DIR.
        "baseline-env": [*FLAGS, sys.executable, str(PLUGINS / "_baseline.py")],
        "exits-at-once": [*FLAGS, "--", "sh", "-c", "echo 'cannot open /dev/nothing' >&2; exit 7"],
    }
    for path in sorted(PLUGINS.glob("[a-z]*.py")):
        runs[path.stem] = [*FLAGS, "--", *script(path.stem)]
    return runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Run]:
    devices = tmp_path_factory.mktemp("devices")
    for index in range(2):
        (devices / f"serial{index}").touch()
    all_cases = cases(str(devices / "serial*"), str(tmp_path_factory.mktemp("cdi")))
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        results = dict(
            zip(all_cases, pool.map(lambda args: conformance(*args), all_cases.values()), strict=True)
        )
    return results


def assert_only(run: Run, expected: Mapping[str, tuple[str, str]], *, passed: bool) -> None:
    """The expected rows have the expected result and text; every other row is PASS or SKIP."""
    rows = run.rows
    assert tuple(rows) == CHECKS, run.stdout
    for name, (result, text) in expected.items():
        got_result, detail = rows[name]
        assert (got_result, text in detail) == (result, True), f"{name}: {got_result} {detail!r}"
    for name, (result, detail) in rows.items():
        if name not in expected:
            assert result in ("PASS", "SKIP"), f"{name}: {result} {detail!r}"
    assert run.report["passed"] is passed
    assert run.returncode == (0 if passed else 1), run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("case", ["sdk-fake", "sdk-paths", "baseline-env"])
def test_good_plugins_pass(runs: Mapping[str, Run], case: str) -> None:
    run = runs[case]
    assert_only(run, {}, passed=True)
    assert run.rows["kubelet-restart"][0] == "PASS"
    assert "re-registered 2/2 times; median" in run.rows["kubelet-restart"][1]
    assert run.rows["kubelet-absence"][0] == "PASS"
    assert run.rows["allocate"][0] == "PASS"
    assert "log_tail" not in run.report


def test_every_option_of_the_sdk_fake_plugin_passes(runs: Mapping[str, Run]) -> None:
    run = runs["sdk-fake-all-options"]
    assert_only(run, {}, passed=True)
    assert {result for result, _ in run.rows.values()} == {"PASS"}
    assert "GetPreferredAllocation advertised and answers" in run.rows["options"][1]
    assert "(the kubelet allows 30 s)" in run.rows["pre-start"][1]
    assert "4 CDI devices" in run.rows["allocate"][1]
    assert "4 CDI devices defined by specs in /etc/cdi, " in run.rows["allocate"][1]


NOT_REGISTERED = "not run: the registration was refused"


def test_bad_numa_reporting_is_a_warning_naming_the_devices(runs: Mapping[str, Run]) -> None:
    run = runs["bad_numa"]
    assert_only(
        run,
        {"topology": ("WARN", "devices dev-3 report NUMA node [7] that this node does not have")},
        passed=True,
    )
    detail = run.rows["topology"][1]
    assert "devices dev-4 report no NUMA node while the resource's others do" in detail
    assert (
        "the preferred allocation of 2 from all 5 healthy devices spans NUMA nodes (dev-0, dev-1)" in detail
    )


def test_a_shared_fake_plugin_that_refuses_multiple_replicas_passes(runs: Mapping[str, Run]) -> None:
    run = runs["sdk-fake-shared"]
    assert_only(run, {}, passed=True)
    assert {result for result, _ in run.rows.values()} == {"PASS"}
    assert "12 devices, 12 healthy" in run.rows["list-and-watch"][1]
    # A plugin may refuse more devices than it gives one container: the kubelet fails only those pods.
    allocate = run.rows["allocate"][1]
    assert "1 device -> 0 device specs" in allocate
    assert (
        "12 devices refused (INVALID_ARGUMENT: allocate: request for 12 example.com/fake replicas" in allocate
    )
    # The spread keeps a container's replicas on one NUMA node: the topology check sees them packed.
    assert "12 devices on NUMA nodes [0, 1]; this node has [0, 1]" in run.rows["topology"][1]


def test_sdk_fake_plugin_reports_aligned_numa_nodes(runs: Mapping[str, Run]) -> None:
    detail = runs["sdk-fake-all-options"].rows["topology"][1]
    assert "4 devices on NUMA nodes [0, 1]; this node has [0, 1]" in detail


@pytest.mark.parametrize(
    ("case", "expected", "passed"),
    [
        (
            "never_reregisters",
            {
                "kubelet-restart": ("FAIL", "restart 1/2: no registration within 8 s after kubelet.sock"),
                "kubelet-absence": ("SKIP", "not run: the plugin did not come back after a kubelet restart"),
            },
            False,
        ),
        (
            "duplicate_ids",
            {"list-and-watch": ("FAIL", "duplicate device IDs [dev-1]")},
            False,
        ),
        (
            "lowercase_health",
            {
                "list-and-watch": ("WARN", 'health \'healthy\' is neither "Healthy" nor "Unhealthy"'),
                "allocate": ("SKIP", 'not run: no device is "Healthy"'),
            },
            True,
        ),
        (
            "huge_device_list",
            {"list-and-watch": ("WARN", "the list is 5519996 bytes, above gRPC's 4 MiB default")},
            True,
        ),
        (
            "slow_first_list",
            {"list-and-watch": ("FAIL", "no device list within 1 s of ListAndWatch")},
            False,
        ),
        (
            "ends_list_and_watch",
            {"list-and-watch": ("FAIL", "ListAndWatch ended after the first list (the plugin returned from")},
            False,
        ),
        (
            "no_container_responses",
            {"allocate": ("FAIL", "0 container responses for 1 container request")},
            False,
        ),
        (
            "bad_device_spec",
            {
                "allocate": (
                    "FAIL",
                    "'dev/conformance0': container_path must be absolute (Allocate of 1, 4 devices)",
                )
            },
            False,
        ),
        (
            "bad_env_and_cdi",
            {
                "allocate": (
                    "FAIL",
                    "CDI device 'dev-0' is not fully qualified — write it as vendor/class=name",
                )
            },
            False,
        ),
        (
            "undefined_cdi_device",
            {
                "allocate": (
                    "WARN",
                    "CDI device(s) [example.com/conformance=dev-0, example.com/conformance=dev-1, "
                    "example.com/conformance=dev-2, example.com/conformance=dev-3] named in Allocate "
                    "answers are defined by no spec in /etc/cdi, /var/run/cdi: the runtime fails the "
                    "container — write a spec defining them",
                )
            },
            True,
        ),
        (
            "preferred_ignores_must_include",
            {
                "preferred-allocation": (
                    "FAIL",
                    "answer leaves out must_include [dev-3] (got ['dev-0', 'dev-1'])",
                )
            },
            False,
        ),
        (
            "accepts_unknown_ids",
            {"allocate": ("WARN", 'accepted the unknown device ID "kubedevice-conformance-no-such-device"')},
            True,
        ),
        (
            "prestart_not_implemented",
            {
                "pre-start": ("FAIL", "PreStartContainer failed: UNIMPLEMENTED"),
                "options": ("FAIL", "pre_start_required is set but PreStartContainer fails"),
            },
            False,
        ),
        (
            "dies_without_kubelet",
            {
                "kubelet-absence": ("FAIL", "the plugin exited with code 3 while kubelet.sock was absent"),
                "plugin-process": ("WARN", "exited (exit code 3) during kubelet absent"),
            },
            False,
        ),
    ],
)
def test_broken_plugin_is_caught_on_its_check(
    runs: Mapping[str, Run], case: str, expected: Mapping[str, tuple[str, str]], passed: bool
) -> None:
    assert_only(runs[case], expected, passed=passed)


@pytest.mark.parametrize(
    ("case", "registration"),
    [
        ("wrong_version", 'version "v1alpha" refused: send "v1beta1"'),
        ("invalid_resource_name", 'resource name "Example.com/gpu" is not a valid extended resource name'),
        (
            "registers_before_serving",
            "did not answer when Register was called (UNAVAILABLE: no such socket file)",
        ),
    ],
)
def test_refused_registration_fails_and_stops_the_rest(
    runs: Mapping[str, Run], case: str, registration: str
) -> None:
    run = runs[case]
    rows = run.rows
    assert rows["registration"][0] == "FAIL" and registration in rows["registration"][1]
    for name in CHECKS[1:-1]:
        assert rows[name] == ("SKIP", NOT_REGISTERED), name  # one FAIL for the cause, the rest skipped
    # These plugins exit on a refusal, and the report says so with the code and the plugin's own words.
    assert rows["plugin-process"] == ("WARN", "the plugin exited (exit code 1) during registration (refused)")
    assert any("plugin failed: UNKNOWN" in line for line in run.report["log_tail"])
    assert run.returncode == 1


def test_a_plugin_that_exits_at_once_shows_its_log(runs: Mapping[str, Run]) -> None:
    run = runs["exits-at-once"]
    assert run.rows["registration"] == ("FAIL", "the plugin exited with code 7 before registering")
    assert run.rows["options"] == ("SKIP", "not run: the plugin did not register")
    assert [r for r in run.rows.values() if r[0] == "FAIL"] == [run.rows["registration"]]
    assert run.rows["plugin-process"][0] == "WARN"
    assert run.report["log_tail"] == ["cannot open /dev/nothing"]
    assert run.returncode == 1


def test_table_output(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            KUBEDEVICE,
            "conformance",
            "--timeout",
            "8",
            "--restarts",
            "1",
            "--absence",
            "0",
            "--",
            *script("duplicate_ids"),
        ],
        capture_output=True,
        text=True,
        timeout=150,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    row = next(line for line in lines if "list-and-watch" in line)
    assert "FAIL" in row and "duplicate device IDs [dev-1]" in row
    assert any("kubelet-restart" in line and "PASS" in line and "1/1" in line for line in lines)
    assert lines[-1].strip() == "FAILED"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "no plugin command given"),
        (("--json",), "no plugin command given"),
        (("--", "kubedevice-no-such-plugin"), "command not found: kubedevice-no-such-plugin"),
        (("--timeout", "soon", "--", "true"), "Invalid value for '--timeout'"),
        (("--timeout", "0", "--", "true"), "--timeout must be a positive number of seconds, got 0"),
        (("--timeout", "nan", "--", "true"), "--timeout must be a positive number of seconds"),
        (("--restarts", "-1", "--", "true"), "--restarts must be 0 or more, got -1"),
        (("--absence", "-2", "--", "true"), "--absence must be 0 or more seconds"),
        (("--bogus", "--", "true"), "No such option: --bogus"),
        (("--numa-nodes", "0", "--", "true"), "--numa-nodes must be 1 or more, got 0"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    run = conformance(*args)
    assert run.returncode == 2
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], run.stderr
    assert lines[0].startswith("error: conformance: ") and " — " in lines[0], lines[0]


def test_a_file_that_is_not_executable_is_a_usage_error(tmp_path: Path) -> None:
    plain = tmp_path / "plugin.txt"
    plain.write_text("not a program\n")
    run = conformance("--", str(plain))
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"error: conformance: command not found: {plain} — see 'kubedevice conformance --help'"
    ]


def test_help_names_the_contract() -> None:
    out = subprocess.run([KUBEDEVICE, "conformance", "--help"], capture_output=True, text=True, check=True)
    for flag in ("--timeout", "--restarts", "--json", "--absence"):
        assert flag in out.stdout


def test_a_command_that_exits_at_once_says_so_first() -> None:
    run = subprocess.run(
        [KUBEDEVICE, "conformance", "--timeout", "5", "--", "false"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[0] == "registration failed: the plugin exited with code 1 before registering", run.stdout
    fails = [line for line in lines if "│ FAIL" in line]
    assert len(fails) == 1 and "registration" in fails[0], run.stdout
