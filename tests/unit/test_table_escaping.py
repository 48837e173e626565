"""Tables and lines of `kubedevice status`, `pods`, `claims`, `podresources` and `top` show control
characters in file names, device IDs and messages escaped as the daemon's log writes them, and rich markup
as it is (issue 35): a manifest named `\\x1b[31m.yaml` cannot colour the terminal, a device ID with a
newline cannot break a table's line, `[/x]` in a name cannot make rich raise, a file name that is not UTF-8
cannot make printing fail."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from kubedevice.console import shown
from kubedevice.statusapi.tables import print_claims, print_node, print_pods
from kubedevice.top.frame import render
from kubedevice.top.model import DeviceCell, HeldBy, ResourceRow, TopView

#: A terminal escape, rich markup (a closing tag nothing opened makes rich raise), a newline, a byte that
#: is not UTF-8 (a file name as os.listdir gives it), a C1 control.
HOSTILE = "a\x1b[31mb[/x][bold]c\nd\udcff\x9b"
SHOWN = "a\\x1b[31mb[/x][bold]c\\x0ad\\udcff\\x9b"


def printed(print_it: Callable[[Console, Any], None], data: Any) -> str:
    out = io.StringIO()
    print_it(Console(file=out, width=400, color_system=None), data)
    return out.getvalue()


def test_shown_escapes_controls_and_markup() -> None:
    # rich's escape: a backslash before each `[` that could open a tag.
    assert shown(HOSTILE) == "a\\x1b[31mb\\[/x]\\[bold]c\\x0ad\\udcff\\x9b"
    out = printed(lambda console, text: console.print(text), shown(HOSTILE))
    assert out == SHOWN + "\n"


def _pods_answer() -> dict[str, Any]:
    container = {"name": "main", "devices": {"example.com/gpu": [HOSTILE]}, "claims": []}
    pod = {"namespace": "default", "name": "p", "phase": "Pending", "terminating": False}
    pod |= {"reason": "PrepareFailed", "message": HOSTILE, "detail": HOSTILE, "warnings": [HOSTILE]}
    return {
        "pods": [pod | {"containers": [container]}],
        "manifestErrors": [{"file": HOSTILE, "error": HOSTILE}],
    }


def _node_answer() -> dict[str, Any]:
    resource = {"healthy": [HOSTILE], "unhealthy": [], "endpoint": HOSTILE, "stoppedSeconds": None}
    return {
        "capacity": {HOSTILE: 1},
        "allocatable": {HOSTILE: 1},
        "resources": {HOSTILE: resource},
        "checkpoint": {"path": HOSTILE, "error": HOSTILE},
        "draDrivers": {
            HOSTILE: {"endpoints": [{"endpoint": HOSTILE, "connected": True}], "devices": [HOSTILE]}
        },
        "nodeName": HOSTILE,
    }


def _claims_answer() -> dict[str, Any]:
    result = {"request": "gpu", "driver": HOSTILE, "pool": "p", "device": HOSTILE}
    return {
        "claims": [
            {
                "namespace": "default",
                "name": HOSTILE,
                "uid": HOSTILE,
                "generatedFor": "u",
                "allocation": {"devices": {"results": [result]}},
                "allocatedBy": HOSTILE,
                "reservedFor": [{"name": HOSTILE, "uid": "u"}],
                "cdiDevices": [HOSTILE],
                "pods": [{"uid": "u", "pod": HOSTILE}],
            }
        ]
    }


# `times`: the values shown whole (the DRA drivers table splits a device's `<pool>/<device>` at its `/`).
@pytest.mark.parametrize(
    ("print_it", "data", "times"),
    [(print_pods, _pods_answer(), 6), (print_node, _node_answer(), 8), (print_claims, _claims_answer(), 9)],
    ids=["pods", "status", "claims"],
)
def test_tables_show_hostile_text_escaped(
    print_it: Callable[[Console, Any], None], data: dict[str, Any], times: int
) -> None:
    out = printed(print_it, data)
    assert "\x1b" not in out and "\x9b" not in out and "\udcff" not in out
    out.encode("utf-8")  # printable to any UTF-8 stdout
    # Every value whole on its line: no cell broken by the newline, markup shown as it is.
    assert out.count(SHOWN) == times, out


def test_top_shows_hostile_text_escaped() -> None:
    cell = DeviceCell(HOSTILE, (), False, ("default/p" + HOSTILE,))
    row = ResourceRow(HOSTILE, (cell,))
    view = TopView("source", (row,), (HeldBy("default/p" + HOSTILE, HOSTILE, HOSTILE, (HOSTILE,)),), True)
    out = printed(lambda console, v: console.print(render(v)), view)
    assert "\x1b" not in out and "\udcff" not in out
    assert SHOWN in out
