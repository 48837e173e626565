"""What a conformance run found: one row per check, and the two ways to print it (table, JSON)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kubedevice.wording import counted


class Result(enum.Enum):
    """A check's verdict. Ordered by severity so a check's result is the worst of its findings."""

    PASS = "PASS"
    SKIP = "SKIP"
    WARN = "WARN"
    FAIL = "FAIL"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {Result.PASS: 0, Result.SKIP: 1, Result.WARN: 2, Result.FAIL: 3}
_STYLE = {Result.PASS: "green", Result.SKIP: "dim", Result.WARN: "yellow", Result.FAIL: "bold red"}


@dataclass(frozen=True)
class CheckResult:
    """One row of the report: the check's name, its verdict and a reason a plugin author can act on."""

    name: str
    result: Result
    detail: str


@dataclass
class Findings:
    """Collects what one check saw; the worst finding decides the row, the failures are listed first."""

    name: str
    _failures: list[str] = field(default_factory=list)
    _warnings: list[str] = field(default_factory=list)
    _notes: list[str] = field(default_factory=list)
    _skipped: str | None = None

    def fail(self, message: str) -> None:
        self._failures.append(message)

    def warn(self, message: str) -> None:
        self._warnings.append(message)

    def note(self, message: str) -> None:
        self._notes.append(message)

    def skip(self, reason: str) -> None:
        self._skipped = reason

    @property
    def failed(self) -> bool:
        return bool(self._failures)

    def result(self) -> CheckResult:
        if self._failures:
            verdict = Result.FAIL
        elif self._warnings:
            verdict = Result.WARN
        elif self._skipped is not None:
            verdict = Result.SKIP
        else:
            verdict = Result.PASS
        parts = [*_capped(self._failures, "failure"), *_capped(self._warnings, "warning")]
        if self._skipped is not None:
            parts.append(self._skipped)
        parts.extend(self._notes)
        return CheckResult(self.name, verdict, "; ".join(parts))


#: More than this many findings of one kind make a row unreadable; the rest are counted.
MAX_LISTED = 4


def _capped(messages: list[str], kind: str) -> list[str]:
    unique = list(dict.fromkeys(messages))
    if len(unique) <= MAX_LISTED:
        return unique
    return [*unique[:MAX_LISTED], f"and {counted(len(unique) - MAX_LISTED, 'more ' + kind)}"]


def not_run(name: str, why: str) -> CheckResult:
    """A check an earlier failure kept from running: skipped, with why; the earlier row is the FAIL.

    One FAIL for the cause reads better than a column of FAILs that all say the same thing.
    """
    return CheckResult(name, Result.SKIP, f"not run: {why}")


def skipped(name: str, why: str) -> CheckResult:
    """A check that does not apply to this plugin (for example an RPC it does not advertise)."""
    return CheckResult(name, Result.SKIP, why)


@dataclass(frozen=True)
class Report:
    """All rows of one run, in check order, and the tail of the plugin's log when it matters."""

    checks: tuple[CheckResult, ...]
    log_tail: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return all(check.result is not Result.FAIL for check in self.checks)

    def to_json(self) -> str:
        document: dict[str, object] = {
            "checks": [
                {"name": check.name, "result": check.result.value, "detail": check.detail}
                for check in self.checks
            ],
            "passed": self.passed,
        }
        if self.log_tail:
            document["log_tail"] = list(self.log_tail)
        return json.dumps(document, indent=2)

    def print_table(self, console: Console) -> None:
        first = self.checks[0] if self.checks else None
        if first is not None and first.result is Result.FAIL:
            # The cause first: when the plugin never registered, nothing after it could run.
            console.print(Text(f"{first.name} failed: {first.detail}", style=_STYLE[Result.FAIL]))
        table = Table(title="kubedevice conformance", title_justify="left", show_lines=False)
        table.add_column("check", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("detail", overflow="fold")
        for check in self.checks:
            # Text, not str: details quote plugin data such as "[dev-1]", which rich would take for markup.
            table.add_row(
                check.name, Text(check.result.value, style=_STYLE[check.result]), Text(check.detail)
            )
        console.print(table)
        if self.log_tail:
            console.print("plugin log (last lines):", style="bold")
            for line in self.log_tail:
                console.print(Text(f"  {line}"))
        verdict = "PASSED" if self.passed else "FAILED"
        console.print(Text(verdict, style=_STYLE[Result.PASS if self.passed else Result.FAIL]))
