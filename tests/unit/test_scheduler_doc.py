"""docs/scheduler.md's example runs as written: its python blocks, executed in order in one namespace, each
print what the text block after it shows; and the page names every public name of kubedevice.scheduler."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import kubedevice.scheduler

DOC = Path(__file__).resolve().parents[2] / "docs" / "scheduler.md"
#: A python block, then (after the words between) the text block it prints.
EXAMPLE = re.compile(r"```python\n(.*?)```\n(?:(?!```).)*?```text\n(.*?)```", re.DOTALL)


def test_the_example_prints_what_the_page_shows() -> None:
    examples = EXAMPLE.findall(DOC.read_text(encoding="utf-8"))
    assert len(examples) >= 2
    namespace: dict[str, Any] = {"__name__": "scheduler_doc"}
    for number, (code, shown) in enumerate(examples):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"docs/scheduler.md python block {number}", "exec"), namespace)
        assert out.getvalue() == shown, f"python block {number}"


def test_the_page_names_every_public_name() -> None:
    page = DOC.read_text(encoding="utf-8")
    for name in kubedevice.scheduler.__all__:
        assert f"`{name}" in page, name
