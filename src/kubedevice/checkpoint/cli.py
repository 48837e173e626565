"""`kubedevice checkpoint`: look into a checkpoint file, ours or a real kubelet's.

Either kind, recognised by its content: the device manager's `kubelet_internal_checkpoint` (here) or the DRA
manager's `dra_manager_state` (:mod:`.dra_view`, a file whose ``Data`` is a string).

Exit codes: 0 the file is good; 1 the file is not a valid checkpoint (bad JSON, wrong types, checksum
mismatch); 2 the file cannot be read at all (missing, no permission, a directory). Errors are one line on
stderr, never a traceback.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import typer
from google.protobuf.message import DecodeError
from rich.table import Table
from rich.text import Text

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint import (
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointUnreadableError,
    PodDevicesEntry,
    UnverifiedCheckpoint,
    decode,
    decode_unverified,
    dra_view,
    is_dra_checkpoint,
    read_file,
)
from kubedevice.console import fail, make_console
from kubedevice.wording import counted

app = typer.Typer(
    rich_markup_mode=None,
    name="checkpoint",
    help=(
        "Inspect and verify a checkpoint file: kubelet_internal_checkpoint (v2, and the pre-1.20 v1)"
        " or dra_manager_state (recognised by its content)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_INVALID = 1
EXIT_UNREADABLE = 2


def _fail(message: str, code: int) -> NoReturn:
    fail(message.removeprefix("error: "), code)


def _read(path: Path) -> bytes:
    try:
        return read_file(path)
    except (CheckpointNotFoundError, CheckpointUnreadableError) as err:
        _fail(f"error: {err}", EXIT_UNREADABLE)
    except CheckpointError as err:
        _fail(f"error: {err}", EXIT_INVALID)


@dataclass(frozen=True, slots=True)
class _AllocSummary:
    """What a person wants to see of a ContainerAllocateResponse, or why it could not be decoded."""

    envs: dict[str, str]
    mounts: list[dict[str, object]]
    devices: list[dict[str, object]]
    annotations: dict[str, str]
    cdi_devices: list[str]
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "envs": self.envs,
            "mounts": self.mounts,
            "devices": self.devices,
            "annotations": self.annotations,
            "cdiDevices": self.cdi_devices,
        }


def _summarize(raw: bytes) -> _AllocSummary:
    try:
        resp = dp.ContainerAllocateResponse.FromString(raw)
    except DecodeError as err:
        # The kubelet skips such an entry when it restores; show why.
        return _AllocSummary({}, [], [], {}, [], error=f"not a ContainerAllocateResponse: {err}")
    return _AllocSummary(
        envs=dict(sorted(resp.envs.items())),
        mounts=[
            {"containerPath": m.container_path, "hostPath": m.host_path, "readOnly": m.read_only}
            for m in resp.mounts
        ],
        devices=[
            {"containerPath": d.container_path, "hostPath": d.host_path, "permissions": d.permissions}
            for d in resp.devices
        ],
        annotations=dict(sorted(resp.annotations.items())),
        cdi_devices=[c.name for c in resp.cdi_devices],
    )


def _entry_json(entry: PodDevicesEntry) -> dict[str, object]:
    summary = None if entry.alloc_resp is None else _summarize(entry.alloc_resp)
    ids = entry.device_ids
    return {
        "podUID": entry.pod_uid,
        "containerName": entry.container_name,
        "resourceName": entry.resource_name,
        "deviceIDs": None if ids is None else {str(node): ids[node] for node in sorted(ids)},
        "allocResp": None if summary is None or summary.error else summary.to_json(),
        "allocRespError": None if summary is None else summary.error,
    }


def _inspection_json(path: Path, found: UnverifiedCheckpoint) -> dict[str, object]:
    data = found.decoded.data
    return {
        "path": str(path),
        "formatVersion": found.decoded.format_version,
        "checksum": {
            "found": found.decoded.checksum,
            "computed": found.computed_checksum,
            "valid": found.valid,
        },
        "registeredDevices": data.registered_devices,
        "entries": [_entry_json(e) for e in data.pod_device_entries or []],
    }


def _devices_text(entry: PodDevicesEntry) -> Text:
    if entry.device_ids is None:
        return Text("(none)", style="dim")
    lines = []
    for node in sorted(entry.device_ids):
        where = "no topology" if node == -1 else f"NUMA {node}"
        lines.append(f"{where}: {', '.join(entry.device_ids[node]) or '(empty)'}")
    return Text("\n".join(lines))


def _alloc_text(entry: PodDevicesEntry) -> Text:
    if entry.alloc_resp is None:
        return Text("(none)", style="dim")
    summary = _summarize(entry.alloc_resp)
    if summary.error:
        return Text(summary.error, style="red")
    lines = []
    if summary.envs:
        lines.append("env: " + ", ".join(summary.envs))
    if summary.devices:
        lines.append("devices: " + ", ".join(str(d["hostPath"]) for d in summary.devices))
    if summary.mounts:
        lines.append("mounts: " + ", ".join(str(m["containerPath"]) for m in summary.mounts))
    if summary.cdi_devices:
        lines.append("cdi: " + ", ".join(summary.cdi_devices))
    if summary.annotations:
        lines.append("annotations: " + ", ".join(summary.annotations))
    return Text("\n".join(lines) or "(empty response)")


def _print_inspection(path: Path, found: UnverifiedCheckpoint) -> None:
    console = make_console(highlight=False)
    decoded = found.decoded
    console.print(Text(f"Checkpoint {path}"), style="bold")
    console.print(Text(f"format v{decoded.format_version}"))
    if found.valid:
        console.print(Text(f"checksum {decoded.checksum}: valid", style="green"))
    else:
        console.print(
            Text(
                f"checksum INVALID: file says {decoded.checksum},"
                f" content hashes to {found.computed_checksum}",
                style="bold red",
            )
        )
    data = decoded.data
    entries = Table(title="Pod device entries", title_justify="left")
    for column in ("Pod UID", "Container", "Resource", "Devices", "Allocate response"):
        entries.add_column(column, overflow="fold")
    for entry in data.pod_device_entries or []:
        entries.add_row(
            Text(entry.pod_uid),
            Text(entry.container_name),
            Text(entry.resource_name),
            _devices_text(entry),
            _alloc_text(entry),
        )
    if data.pod_device_entries is None:
        entries.caption = "null: nothing allocated"
    console.print(entries)
    registered = Table(title="Registered devices (healthy at write time)", title_justify="left")
    registered.add_column("Resource", overflow="fold")
    registered.add_column("Devices", overflow="fold")
    for resource, devices in sorted((data.registered_devices or {}).items()):
        registered.add_row(Text(resource), Text(", ".join(devices) or "(none healthy)"))
    if data.registered_devices is None:
        registered.caption = "null"
    console.print(registered)


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="The checkpoint file.", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Show a checkpoint's entries and registered devices, or a DRA checkpoint's claims; exit 1 if its
    checksum does not hold."""
    raw = _read(path)
    if is_dra_checkpoint(raw):
        dra_view.inspect(path, raw, as_json, _fail, EXIT_INVALID)
        return
    try:
        found = decode_unverified(raw)
    except CheckpointError as err:
        _fail(f"error: {path}: {err}", EXIT_INVALID)
    if as_json:
        sys.stdout.write(json.dumps(_inspection_json(path, found), indent=2, ensure_ascii=False) + "\n")
    else:
        _print_inspection(path, found)
    if not found.valid:
        raise typer.Exit(EXIT_INVALID)


@app.command()
def verify(path: Path = typer.Argument(..., help="The checkpoint file.", show_default=False)) -> None:
    """Check a checkpoint's checksum: exit 0 if it holds, 1 if the file is bad, 2 if it cannot be read."""
    raw = _read(path)
    if is_dra_checkpoint(raw):
        dra_view.verify(path, raw, _fail, EXIT_INVALID)
        return
    try:
        decoded = decode(raw)
    except CheckpointError as err:
        _fail(f"error: {path}: {err}", EXIT_INVALID)
    data = decoded.data
    entries = counted(len(data.pod_device_entries or []), "entry", "entries")
    resources = counted(len(data.registered_devices or {}), "resource")
    typer.echo(f"OK: checksum {decoded.checksum}, {entries}, {resources}, format v{decoded.format_version}")
