"""A Pending pod's explanation under the pods table: one line per request that cannot get all it wants
(every request when each could), nothing for a pod that does not wait for an allocation; 100 pods stay one
row each."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from kubedevice.statusapi.tables import print_pods, waiting_lines


def request(name: str, wanted: int, fit: int) -> dict[str, Any]:
    return {
        "request": name,
        "wanted": wanted,
        "fit": fit,
        "text": f"default/c, request {name!r}: {fit}/{wanted}",
    }


def pod(name: str, waiting: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "namespace": "default",
        "name": name,
        "phase": "Pending",
        "reason": "Unschedulable" if waiting else "",
        "message": "cannot allocate all claims: ..." if waiting else "",
        "waiting": waiting,
        "containers": [{"name": "main", "devices": {}, "claims": []}],
    }


def test_only_the_requests_that_fall_short_or_all_when_none_does() -> None:
    short = {"requests": [request("a", 2, 2), request("b", 3, 1), request("all", 0, 0)]}
    assert waiting_lines(short) == ["default/c, request 'b': 1/3", "default/c, request 'all': 0/0"]
    combination = {"requests": [request("a", 2, 2), request("b", 1, 4)]}
    assert waiting_lines(combination) == ["default/c, request 'a': 2/2", "default/c, request 'b': 4/1"]
    assert waiting_lines(None) == []


def test_the_lines_come_under_the_table_and_the_table_keeps_one_row_a_pod() -> None:
    pods = [pod(f"p{i}", {"requests": [request("gpu", 2, 1)]} if i % 2 else None) for i in range(100)]
    console = Console(width=120, record=True)
    print_pods(console, {"pods": pods, "manifestErrors": []})
    text = console.export_text()
    table, _, notes = text.rpartition("┘")
    assert sum(1 for line in table.splitlines() if "default/p" in line) == 100
    assert notes.strip().splitlines() == [
        f"default/p{i} waits: default/c, request 'gpu': 1/2" for i in range(1, 100, 2)
    ]
