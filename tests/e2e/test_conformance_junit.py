"""`kubedevice conformance --junit-xml PATH`: one test case per check, valid against the common JUnit schema.

A passing plugin (the SDK's fake) and a broken one (it accepts unknown device IDs: a WARN, and its
PreStartContainer is not implemented: a FAIL) run for real; the files are validated with tests/data/junit.xsd.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import xmlschema

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")
PLUGINS = Path(__file__).resolve().parent.parent / "conformance_plugins"
SCHEMA = xmlschema.XMLSchema(str(Path(__file__).resolve().parent.parent / "data" / "junit.xsd"))
FAST = ("--timeout", "8", "--restarts", "1", "--absence", "0.5")


def run(junit: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBEDEVICE, "conformance", *FAST, "--json", "--junit-xml", str(junit), "--", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )


def cases(junit: Path) -> dict[str, ET.Element]:
    SCHEMA.validate(str(junit))
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return {case.attrib["name"]: case for case in suite.iter("testcase")}


def test_a_passing_plugin_gives_passing_and_skipped_cases(tmp_path: Path) -> None:
    junit = tmp_path / "conformance.xml"
    done = run(junit, KUBEDEVICE, "plugin", "fake", "--resource", "example.com/fake", "--devices", "2",
               "--plugin-dir", "{plugin_dir}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = cases(junit)
    assert next(iter(found)) == "registration" and len(found) == 10
    assert all(case.find("failure") is None for case in found.values())
    skipped = {name for name, case in found.items() if case.find("skipped") is not None}
    assert skipped == {"preferred-allocation", "pre-start"}
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.attrib["tests"] == "10" and suite.attrib["failures"] == "0"


def test_fail_and_warn_rows_become_failures_and_output(tmp_path: Path) -> None:
    junit = tmp_path / "conformance.xml"
    done = run(junit, sys.executable, str(PLUGINS / "prestart_not_implemented.py"), "{plugin_dir}")
    assert done.returncode == 1
    found = cases(junit)
    failure = found["pre-start"].find("failure")
    assert failure is not None and "UNIMPLEMENTED" in (failure.attrib["message"] + (failure.text or ""))
    warned = subprocess.run(  # a WARN is a passing case that says so
        [KUBEDEVICE, "conformance", *FAST, "--junit-xml", str(tmp_path / "w.xml"), "--",
         sys.executable, str(PLUGINS / "accepts_unknown_ids.py"), "{plugin_dir}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert warned.returncode == 0, warned.stdout
    allocate = cases(tmp_path / "w.xml")["allocate"]
    assert allocate.find("failure") is None
    assert (allocate.findtext("system-out") or "").startswith("WARN: ")


def test_a_junit_path_in_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    done = run(tmp_path / "nope" / "x.xml", "true")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: conformance: --junit-xml "), done.stderr
