"""The status API's answers as rich tables: `/node` (device-plugin resources and DRA drivers) for
`kubedevice status`, `/pods` for `kubedevice pods`, `/claims` for `kubedevice claims` (the drivers' device
status as lines under it); the demo prints them too.

Columns wrap at spaces or fold (a resource's, a pod's, a claim's and a driver's name stay whole); nothing is
cut with "…", so a 100-column terminal shows it all. Where the output is not a terminal nothing is folded:
a UID or a CDI ID stays on one line for the scripts that read it (console.print_whole). Every value from
the answer is shown through console.shown: a control character in a file's, a device's or a message's text
is escaped as the logs write it, and rich markup in it is shown as it is.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from kubedevice.console import print_whole, shown
from kubedevice.statusapi import contract


def print_node(console: Console, data: dict[str, Any]) -> None:
    table = Table(title="Device-plugin resources")
    table.add_column("resource", no_wrap=True)
    # In a narrow terminal the columns wrap at spaces, and what cannot wrap is folded: never cut with "…".
    for column in ("capacity", "allocatable", "allocated", "free"):
        table.add_column(column, no_wrap=True)
    for column in ("endpoint", "healthy", "unhealthy"):
        table.add_column(column, overflow="fold")
    for resource, info in sorted(data["resources"].items()):
        endpoint = shown(info["endpoint"])
        if info["stoppedSeconds"] is not None:
            endpoint += f" {info['stoppedSeconds']:.0f}s ago"
            if info.get("graceSecondsLeft") is not None and resource in data["capacity"]:
                endpoint += f", leaves capacity in {info['graceSecondsLeft']:.0f}s"
        table.add_row(
            shown(resource),
            str(data["capacity"].get(resource, "-")),
            str(data["allocatable"].get(resource, "-")),
            str(info.get("allocated", "-")),
            str(info.get("free", "-")),
            endpoint,
            shown(", ".join(info["healthy"])),
            shown(", ".join(info["unhealthy"])),
        )
    print_whole(console, table)
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
            f"no device plugin has registered; plugins register at {shown(socket)}",
            highlight=False,
            soft_wrap=True,
        )
    if data["checkpoint"]["error"]:
        checkpoint = data["checkpoint"]
        console.print(
            f"checkpoint {shown(checkpoint['path'])}: {shown(checkpoint['error'])}", highlight=False
        )
    print_dra_drivers(console, data)


def print_pods(console: Console, data: dict[str, Any]) -> None:
    """The status API's `/pods` answer: the pods' table, then one line per manifest that could not be used."""
    table = Table(title="Pods")
    # The daemon's why of a refusal and what a pod runs without: whole lines under the table.
    notes: list[str] = []
    table.add_column("namespace/name", no_wrap=True)
    for column in ("phase", "container", "devices", "health", "numa hint", "reason: message"):
        table.add_column(column, overflow="fold")
    for entry in data["pods"]:
        containers = entry["containers"] or [{"name": "", "devices": {}}]
        for i, c in enumerate(containers):
            first = i == 0
            table.add_row(
                shown(f"{entry['namespace']}/{entry['name']}") if first else "",
                # kubectl's word for a pod whose manifest is gone but which has not ended yet.
                shown("Terminating" if entry.get("terminating") else entry["phase"]) if first else "",
                shown(c["name"]),
                shown(
                    "; ".join(
                        [f"{r}: {', '.join(ids)}" for r, ids in c["devices"].items()]
                        + [_claim_label(claim) for claim in c.get("claims", ())]
                    )
                ),
                _health_label(c.get("allocatedResourcesStatus", ())),
                _hint_label(c.get("topologyHint")),
                shown(f"{entry['reason']}: {entry['message']}" if entry["reason"] else "") if first else "",
            )
        name = f"{entry['namespace']}/{entry['name']}"
        notes.extend(f"{name}: {why}" for why in [entry.get("detail"), *entry.get("warnings", ())] if why)
        if entry.get("pendingEviction"):
            eviction = entry["pendingEviction"]
            notes.append(
                f"{name}: to be evicted at {eviction['at']} for the taint {'; '.join(eviction['taints'])}"
            )
        notes.extend(_health_notes(name, containers))
        notes.extend(f"{name} waits: {line}" for line in waiting_lines(entry.get("waiting")))
    print_whole(console, table)
    for entry in data["manifestErrors"]:
        console.print(f"bad manifest {shown(entry['file'])}: {shown(entry['error'])}", highlight=False)
    for line in notes:
        console.print(shown(line), highlight=False, soft_wrap=True)


def waiting_lines(waiting: dict[str, Any] | None) -> list[str]:
    """A Pending pod's explanation, one line per request that cannot get all it wants (`fit` below
    `wanted`, or an `All` request that matches nothing): those are what it waits for. When every request
    could, the search failed on their combination and every request is shown. `--json`'s `waiting` has
    them all."""
    requests = (waiting or {}).get("requests") or []
    short = [r for r in requests if r["fit"] < r["wanted"] or r["wanted"] == 0]
    return [str(r["text"]) for r in short or requests]


def _not_healthy(statuses: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for status in statuses for r in status["resources"] if r["health"] != "Healthy"]


def _health_label(statuses: Iterable[dict[str, Any]]) -> str:
    """`healthy` (every device the container holds), `1 unhealthy, 1 unknown of 4`, or `-` (none held)."""
    statuses = list(statuses)
    total = sum(len(status["resources"]) for status in statuses)
    if not total:
        return "-"
    counts = Counter(r["health"] for r in _not_healthy(statuses))
    if not counts:
        return "healthy"
    said = [f"{counts[health]} {health.lower()}" for health in ("Unhealthy", "Unknown") if counts[health]]
    return f"{', '.join(said)} of {total}"


def _health_notes(name: str, containers: list[dict[str, Any]]) -> list[str]:
    """`default/p main: gpu.example.com/gpu=gpu-1 Unhealthy (ECC errors)`: which devices are not healthy."""
    notes = []
    for c in containers:
        bad = _not_healthy(c.get("allocatedResourcesStatus", ()))
        if bad:
            said = [f"{r['resourceID']} {r['health']}" + _message(r) for r in bad]
            notes.append(f"{name} {c['name']}: {'; '.join(said)}")
    return notes


def _message(resource: dict[str, Any]) -> str:
    return f" ({resource['message']})" if resource.get("message") else ""


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
            shown(name),
            "\n".join(shown(e["endpoint"]) for e in endpoints) or "-",
            state,
            shown(f"{len(devices)}: {_device_names(devices)}") if devices else "0",
            shown(", ".join(_pools(devices))) or "-",
        )
    for name, info in sorted(unregistered.items()):
        devices = list(info.get("devices", []))
        table.add_row(
            shown(name),
            "not registered",
            "-",
            shown(f"{len(devices)}: {_device_names(devices)}") if devices else "0",
            shown(", ".join(_pools(devices))) or "-",
        )
    print_whole(console, table)
    node_name = contract.node_name_of(data)
    if node_name:
        labels = data.get(contract.NODE_LABELS_FIELD) or {}
        listed = f" (labels: {', '.join(f'{k}={v}' for k, v in labels.items())})" if labels else ""
        console.print(f"DRA node name: {shown(node_name + listed)}", highlight=False, soft_wrap=True)


def _allocation(claim: dict[str, Any]) -> str:
    """`gpu: gpu.example.com/node-1/gpu-0` per result, and who wrote it."""
    allocation = claim.get("allocation")
    if not allocation:
        return "not allocated"
    results = allocation.get("devices", {}).get("results", [])
    lines = [shown(f"{r['request']}: {r['driver']}/{r['pool']}/{r['device']}") for r in results]
    by = claim.get("allocatedBy")
    return "\n".join([*lines, f"(by the {shown(by)})" if by else ""]).strip()


def _reserved(claim: dict[str, Any], pods_by_uid: dict[str, str]) -> str:
    reserved = claim.get("reservedFor") or []
    if not reserved:
        return "-"
    names = [r.get("name") or pods_by_uid.get(r.get("uid", ""), r.get("uid", "?")) for r in reserved]
    by = claim.get("reservedBy")
    return shown(", ".join(names)) + (f" (by the {shown(by)})" if by else "")


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
            shown(name) + (f"\n(for pod {shown(pods.get(origin, origin))})" if origin else ""),
            shown(claim.get("uid") or "-"),
            _allocation(claim),
            _reserved(claim, pods),
            contract.prepared_state(bool(claim.get("prepared")), bool(claim.get("cached"))),
            "\n".join(shown(c) for c in claim.get("cdiDevices", [])) or "-",
            "\n".join(shown(p) for p in pods.values()) or "-",
        )
    print_whole(console, table)
    if not claims:
        console.print("no ResourceClaims: no claim document, template or DRA-backed pod", highlight=False)
    statuses = [
        f"{claim['namespace']}/{claim['name']} {_device_status(entry)}"
        for claim in claims
        for entry in claim.get("statusDevices") or ()
    ]
    if statuses:
        console.print("Device status (status.devices, as the drivers report it):", highlight=False)
    for line in statuses:
        console.print(f"  {shown(line)}", highlight=False, soft_wrap=True)


def _device_status(entry: dict[str, Any]) -> str:
    """`gpu.example.com/node-1/gpu-0: Ready=True, Healthy=False; eth1 10.0.0.5/24; data: model, serial`."""
    device = "/".join(entry[k] for k in ("driver", "pool", "device"))
    if entry.get("shareID"):
        device += f"/{entry['shareID']}"
    conditions = entry.get("conditions") or []
    parts = [", ".join(f"{c['type']}={c['status']}" for c in conditions) or "no conditions"]
    network = entry.get("networkData") or {}
    addresses = [network.get("interfaceName"), *network.get("ips", ()), network.get("hardwareAddress")]
    if any(addresses):
        parts.append(" ".join(a for a in addresses if a))
    data = entry.get("data")
    if data is not None:
        parts.append("data: " + (", ".join(data) if isinstance(data, dict) and data else json.dumps(data)))
    return f"{device}: {'; '.join(parts)}"
