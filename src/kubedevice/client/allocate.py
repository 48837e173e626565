"""`kubedevice allocate`: the allocation the scheduler would make for a pod's claims on a node, from files,
without a daemon; or why there is none (docs/allocate.md).

Exit codes: 0 the claims are allocated, 1 they are not (the scheduler's Unschedulable message and, per
request, what ruled the devices out), 2 a usage error or an input that cannot be used. `--json` prints
one object whose shape docs/allocate.md describes.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kubedevice.console import fail
from kubedevice.logs import escaped
from kubedevice.options import ROOT_HELP, folder_option, root_option

if TYPE_CHECKING:
    from kubedevice.client.allocate_inputs import Plan
    from kubedevice.resource.model import AllocationResult
    from kubedevice.scheduler import Unschedulable

EXIT_UNSCHEDULABLE = 1


def allocate(
    paths: list[str] = typer.Argument(
        None,
        help="Files or folders of documents [default: the daemon's folders under --root-dir].",
        metavar="PATH...",
    ),
    root_dir: str | None = typer.Option(
        None,
        "--root-dir",
        help=f"Also read the daemon's manifest and ResourceSlice folders and its allocations. {ROOT_HELP}",
        metavar="PATH",
    ),
    pod_manifest_path: str | None = typer.Option(
        None,
        "--pod-manifest-path",
        help="The daemon's manifest folder [default: ROOT/manifests].",
        metavar="PATH",
    ),
    pod: str | None = typer.Option(
        None,
        "--pod",
        help="Allocate this Pod's claims (its templates' claims made as the daemon makes them).",
        metavar="FILE",
    ),
    node: str | None = typer.Option(None, "--node", help="The node's name [default: the host name]."),
    node_labels: str = typer.Option(
        "",
        "--node-labels",
        help="KEY=VALUE,...: the node's labels [kubernetes.io/hostname=NODE is set unless given].",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object (docs/allocate.md has its shape)."
    ),
) -> None:
    """The allocation the scheduler would make for unallocated claims, from files, or why there is none."""
    from kubedevice.client.allocate_inputs import InputError, plan, read_inputs
    from kubedevice.resource.names import is_dns_subdomain
    from kubedevice.resource.node_labels import node_labels as with_hostname
    from kubedevice.resource.node_labels import parse_node_labels
    from kubedevice.scheduler import CelSelectors, Unschedulable
    from kubedevice.scheduler import allocate as run_allocation

    name = node if node is not None else socket.gethostname().strip().lower()
    if not is_dns_subdomain(name):
        fail(f"--node {name!r} is not a node name (a DNS subdomain) — give one with --node")
    try:
        labels = with_hostname(name, parse_node_labels(node_labels))
    except ValueError as err:
        fail(f"--node-labels: {err} — write KEY=VALUE,KEY=VALUE with label keys and values")
    sources = [Path(p) for p in paths or ()]
    store: Path | None = None
    if root_dir is not None or not sources:
        root = root_option(root_dir)
        sources += [folder_option("--pod-manifest-path", pod_manifest_path) or root / "manifests"]
        sources += [root / "resourceslices"]
        store = root
    selectors = CelSelectors()
    try:
        inputs = read_inputs(
            sources, selectors, claim_store=store, pod=Path(pod) if pod is not None else None
        )
        made = plan(inputs, name, labels)
    except InputError as err:
        fail(str(err))
    warnings = [r.message for r in (*made.scan.errors, *made.scan.warnings)]
    try:
        allocations = run_allocation(made.request, selectors)
    except Unschedulable as err:
        answer = _answer(name, labels, made, {}, warnings, err)
        _show(answer, as_json)
        raise typer.Exit(EXIT_UNSCHEDULABLE) from None
    by_key = {c.key: a for c, a in zip(made.request.claims, allocations, strict=True)}
    _show(_answer(name, labels, made, by_key, warnings, None), as_json)


def _answer(
    node: str,
    labels: dict[str, str],
    made: Plan,
    allocations: dict[str, AllocationResult],
    warnings: list[str],
    refused: Unschedulable | None,
) -> dict[str, Any]:
    """The command's answer, the `--json` shape (docs/allocate.md)."""
    claims = []
    for claim, template in made.claims:
        key = claim.meta.key
        allocation = allocations.get(key) if key in made.to_allocate else claim.allocation
        claims.append(
            {
                "namespace": claim.meta.namespace,
                "name": claim.meta.name,
                "template": template or None,
                "allocatedBefore": key not in made.to_allocate,
                "allocation": allocation.to_json() if allocation is not None else None,
            }
        )
    return {
        "node": {"name": node, "labels": dict(sorted(labels.items()))},
        "pools": [
            {
                "driver": p.driver,
                "pool": p.name,
                "devices": sum(len(s.devices) for s in p.slices),
                "complete": p.complete,
                "invalid": p.invalid,
            }
            for p in made.scan.pools
        ],
        "allocated": refused is None,
        "claims": claims,
        "unschedulable": None
        if refused is None
        else {
            "reason": refused.reason,
            "message": refused.message,
            "requests": [e.to_json() for e in refused.explanation],
        },
        "warnings": warnings,
    }


def _show(answer: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(answer, indent=1))  # JSON escapes control characters itself
        return
    for warning in answer["warnings"]:
        _say(f"warning: {warning}", err=True)
    node = answer["node"]
    labels = ", ".join(f"{k}={v}" for k, v in node["labels"].items())
    devices = sum(p["devices"] for p in answer["pools"] if p["complete"] and not p["invalid"])
    _say(f"node {node['name']} (labels: {labels}): {len(answer['pools'])} pool(s), {devices} device(s)")
    refused = answer["unschedulable"]
    for claim in answer["claims"]:
        made = f" (from template {claim['template']})" if claim["template"] else ""
        before = " (allocated before)" if claim["allocatedBefore"] else ""
        allocation = claim["allocation"]
        if allocation is None:
            _say(f"ResourceClaim {claim['namespace']}/{claim['name']}{made}: not allocated")
            continue
        _say(f"ResourceClaim {claim['namespace']}/{claim['name']}{made}{before}:")
        for r in allocation["devices"]["results"]:
            _say(f"  {r['request']}: {r['driver']}/{r['pool']}/{r['device']}")
    if refused is not None:
        _say(f"{refused['reason']}: {refused['message']}")
        for request in refused["requests"]:
            _say(f"  {request['text']}")


def _say(line: str, err: bool = False) -> None:
    """A line of names from documents, with their control characters escaped as the logs write them."""
    typer.echo(escaped(line), err=err)


def register(app: typer.Typer) -> None:
    """Add `allocate` to the `kubedevice` command."""
    app.command("allocate")(allocate)
