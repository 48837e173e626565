"""The status API's answers as rich tables, for `kubedevice status`, `kubedevice pods` and the demo."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from kubedevice.statusapi.claim_tables import print_dra_drivers


def print_node(console: Console, data: dict[str, Any]) -> None:
    table = Table(title="Device-plugin resources")
    table.add_column("resource", no_wrap=True)
    # In a narrow terminal the columns wrap at spaces, and what cannot wrap is folded: never cut with "…".
    for column in ("capacity", "allocatable", "allocated", "free"):
        table.add_column(column, no_wrap=True)
    for column in ("endpoint", "healthy", "unhealthy"):
        table.add_column(column, overflow="fold")
    for resource, info in sorted(data["resources"].items()):
        endpoint = info["endpoint"]
        if info["stoppedSeconds"] is not None:
            endpoint += f" {info['stoppedSeconds']:.0f}s ago"
            if info.get("graceSecondsLeft") is not None and resource in data["capacity"]:
                endpoint += f", leaves capacity in {info['graceSecondsLeft']:.0f}s"
        table.add_row(
            resource,
            str(data["capacity"].get(resource, "-")),
            str(data["allocatable"].get(resource, "-")),
            str(info.get("allocated", "-")),
            str(info.get("free", "-")),
            endpoint,
            ", ".join(info["healthy"]),
            ", ".join(info["unhealthy"]),
        )
    console.print(table)
    topology = data.get("topology")
    if topology:
        nodes = ",".join(map(str, topology["numaNodes"])) or "none"
        console.print(
            f"topology manager: policy {topology['policy']}, scope {topology['scope']}, "
            f"NUMA nodes {nodes} ({topology['source']})",
            highlight=False,
        )
    if not data["resources"]:
        socket = data.get("registrationSocket", "kubelet.sock")
        console.print(
            f"no device plugin has registered; plugins register at {socket}",
            highlight=False,
            soft_wrap=True,
        )
    if data["checkpoint"]["error"]:
        console.print(
            f"checkpoint {data['checkpoint']['path']}: {data['checkpoint']['error']}", highlight=False
        )
    print_dra_drivers(console, data)


def print_pods(console: Console, data: dict[str, Any]) -> None:
    """The status API's `/pods` answer: the pods' table, then one line per manifest that could not be used."""
    table = Table(title="Pods")
    # The daemon's why of a refusal and what a pod runs without: whole lines under the table.
    notes: list[str] = []
    table.add_column("namespace/name", no_wrap=True)
    for column in ("phase", "container", "devices", "numa hint", "reason: message"):
        table.add_column(column, overflow="fold")
    for entry in data["pods"]:
        containers = entry["containers"] or [{"name": "", "devices": {}}]
        for i, c in enumerate(containers):
            first = i == 0
            table.add_row(
                f"{entry['namespace']}/{entry['name']}" if first else "",
                # kubectl's word for a pod whose manifest is gone but which has not ended yet.
                ("Terminating" if entry.get("terminating") else entry["phase"]) if first else "",
                c["name"],
                "; ".join(
                    [f"{r}: {', '.join(ids)}" for r, ids in c["devices"].items()]
                    + [_claim_label(claim) for claim in c.get("claims", ())]
                ),
                _hint_label(c.get("topologyHint")),
                (f"{entry['reason']}: {entry['message']}" if entry["reason"] else "") if first else "",
            )
        name = f"{entry['namespace']}/{entry['name']}"
        notes.extend(f"{name}: {why}" for why in [entry.get("detail"), *entry.get("warnings", ())] if why)
    console.print(table)
    for entry in data["manifestErrors"]:
        console.print(f"bad manifest {entry['file']}: {entry['error']}", highlight=False)
    for line in notes:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _claim_label(claim: dict[str, Any]) -> str:
    """`claim default/c1: gpu.example.com gpu-0, gpu-1` (a DRA claim's devices, by driver)."""
    by_driver: dict[str, list[str]] = {}
    for d in claim["devices"]:
        by_driver.setdefault(d["driver"], []).append(d["device"])
    devices = "; ".join(f"{driver} {', '.join(names)}" for driver, names in by_driver.items())
    return f"claim {claim['claim']}: {devices or 'none'}"


def _hint_label(hint: dict[str, Any] | None) -> str:
    """`0 (preferred)`, `0,1`, `any` (no NUMA preference) or `-` (the topology manager chose none)."""
    if hint is None:
        return "-"
    nodes = hint["numaNodes"]
    where = "any" if nodes is None else ",".join(map(str, nodes))
    return f"{where} (preferred)" if hint["preferred"] else where
