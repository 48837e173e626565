"""The status API's DRA answers as rich tables: the claims (`kubedevice claims`, the demo) and the DRA
drivers of `/node` (`kubedevice status`).

Columns wrap at spaces or fold (a claim's and a driver's name stay whole); nothing is cut with "…", so a
100-column terminal shows it all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table


def _pools(devices: Iterable[str]) -> list[str]:
    """The pools of `<pool>/<device>` names, in first-seen order."""
    return list(dict.fromkeys(d.partition("/")[0] for d in devices))


def _device_names(devices: list[str]) -> str:
    """`gpu-0, gpu-1` when every device is in one pool (named in its own column), else `pool/device`s."""
    if len(_pools(devices)) == 1:
        return ", ".join(d.partition("/")[2] for d in devices)
    return ", ".join(devices)


def print_dra_drivers(console: Console, data: dict[str, Any]) -> None:
    """`/node`'s registered DRA drivers (and slices of drivers that are not registered); nothing when
    there are none, so a node without DRA prints what it always did."""
    drivers = data.get("draDrivers") or {}
    unregistered = data.get("unregisteredSliceDrivers") or {}
    if not drivers and not unregistered:
        return
    table = Table(title="DRA drivers")
    table.add_column("driver", no_wrap=True)
    for column in ("endpoints", "connected", "devices", "pools"):
        table.add_column(column, overflow="fold")
    for name, info in sorted(drivers.items()):
        endpoints = info.get("endpoints", [])
        connected = sum(1 for e in endpoints if e.get("connected"))
        devices = list(info.get("devices", []))
        state = f"{connected} of {len(endpoints)}"
        if info.get("wipePending"):
            state += ", slices wiped soon"
        table.add_row(
            name,
            "\n".join(e["endpoint"] for e in endpoints) or "-",
            state,
            f"{len(devices)}: {_device_names(devices)}" if devices else "0",
            ", ".join(_pools(devices)) or "-",
        )
    for name, info in sorted(unregistered.items()):
        devices = list(info.get("devices", []))
        table.add_row(
            name,
            "not registered",
            "-",
            f"{len(devices)}: {_device_names(devices)}" if devices else "0",
            ", ".join(_pools(devices)) or "-",
        )
    console.print(table)
    node_name = data.get("nodeName")
    if node_name:
        console.print(f"DRA node name: {node_name}", highlight=False)


def _allocation(claim: dict[str, Any]) -> str:
    """`gpu: gpu.example.com/node-1/gpu-0` per result, and who wrote it."""
    allocation = claim.get("allocation")
    if not allocation:
        return "not allocated"
    results = allocation.get("devices", {}).get("results", [])
    lines = [f"{r['request']}: {r['driver']}/{r['pool']}/{r['device']}" for r in results]
    by = claim.get("allocatedBy")
    return "\n".join([*lines, f"(by the {by})" if by else ""]).strip()


def _reserved(claim: dict[str, Any], pods_by_uid: dict[str, str]) -> str:
    reserved = claim.get("reservedFor") or []
    if not reserved:
        return "-"
    names = [r.get("name") or pods_by_uid.get(r.get("uid", ""), r.get("uid", "?")) for r in reserved]
    by = claim.get("reservedBy")
    return ", ".join(names) + (f" (by the {by})" if by else "")


def _prepared(claim: dict[str, Any]) -> str:
    if claim.get("prepared"):
        return "yes"
    if claim.get("cached"):
        # Restored from the checkpoint: its pods run with its devices, the driver was not called again.
        return "restored"
    return "no"


def print_claims(console: Console, data: dict[str, Any]) -> None:
    """The status API's `/claims` answer, one row per claim."""
    claims = data.get("claims", [])
    table = Table(title="ResourceClaims")
    # The claim's name whole, as the status table keeps its resource names; the others wrap or fold.
    table.add_column("namespace/name", no_wrap=True)
    for column in ("uid", "allocation", "reserved for", "prepared", "CDI devices", "pods"):
        table.add_column(column, overflow="fold")
    for claim in claims:
        pods = {p["uid"]: p.get("pod") or p["uid"] for p in claim.get("pods", [])}
        origin = claim.get("generatedFor") or claim.get("extendedFor")
        name = f"{claim['namespace']}/{claim['name']}"
        table.add_row(
            # A claim made from a template or for extended resources names its pod (by UID in the API).
            name + (f"\n(for pod {pods.get(origin, origin)})" if origin else ""),
            claim.get("uid") or "-",
            _allocation(claim),
            _reserved(claim, pods),
            _prepared(claim),
            "\n".join(claim.get("cdiDevices", [])) or "-",
            "\n".join(pods.values()) or "-",
        )
    console.print(table)
    if not claims:
        console.print("no ResourceClaims: no claim document, template or DRA-backed pod", highlight=False)
