"""The report as a JUnit XML file, so a CI system shows one test case per conformance check.

FAIL is a `<failure>` with the detail, WARN a passing case whose `<system-out>` says the warning, SKIP a
`<skipped>` case, PASS a passing case. The plugin's log tail, when the report has one, is the suite's
`<system-out>`. The layout is the one Jenkins, GitLab, GitHub Actions reporters and pytest read.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from kubedevice.conformance.report import Report, Result
from kubedevice.durable import replace_file

SUITE = "kubedevice conformance"
CLASSNAME = "kubedevice.conformance"


def to_junit_xml(report: Report, command: Sequence[str], seconds: float) -> bytes:
    counts = {result: sum(1 for c in report.checks if c.result is result) for result in Result}
    attributes = {
        "name": SUITE,
        "tests": str(len(report.checks)),
        "failures": str(counts[Result.FAIL]),
        "errors": "0",
        "skipped": str(counts[Result.SKIP]),
        "time": f"{seconds:.3f}",
    }
    suites = ET.Element("testsuites", {k: v for k, v in attributes.items() if k != "skipped"})
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            **attributes,
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            "hostname": socket.gethostname(),
        },
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "command", "value": " ".join(command)})
    for check in report.checks:
        case = ET.SubElement(suite, "testcase", {"name": check.name, "classname": CLASSNAME, "time": "0"})
        if check.result is Result.FAIL:
            ET.SubElement(case, "failure", {"message": check.detail, "type": "FAIL"}).text = check.detail
        elif check.result is Result.SKIP:
            ET.SubElement(case, "skipped", {"message": check.detail})
        elif check.result is Result.WARN:
            ET.SubElement(case, "system-out").text = f"WARN: {check.detail}"
        elif check.detail:
            ET.SubElement(case, "system-out").text = check.detail
    if report.log_tail:
        ET.SubElement(suite, "system-out").text = "plugin log (last lines):\n" + "\n".join(report.log_tail)
    ET.indent(suites)
    document: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def write_junit_xml(path: Path, document: bytes) -> None:
    """Write atomically: a CI step reading the file never sees half of it."""
    replace_file(path, document)
