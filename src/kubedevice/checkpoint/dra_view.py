"""What `kubedevice checkpoint inspect|verify` show of the DRA manager's checkpoint (`dra_manager_state`):
its claims as tables or JSON, and the verdict on its checksum.

The commands are :mod:`.cli`'s, which recognises the file by its content and hands it here; the exit codes
are the same as for the device manager's checkpoint (0 good, 1 a bad file, 2 unreadable).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import typer
from rich.table import Table
from rich.text import Text

from kubedevice.checkpoint.dra_codec import UnverifiedDRACheckpoint, decode_dra, decode_dra_unverified
from kubedevice.checkpoint.dra_model import ClaimInfoState, DRADevice
from kubedevice.checkpoint.dra_reader import D1_LIST_KEY
from kubedevice.checkpoint.errors import CheckpointError, CorruptDRACheckpointError
from kubedevice.console import make_console

#: How a command of :mod:`.cli` fails: one line on stderr and the exit code.
Fail = Callable[[str, int], NoReturn]


def _decode(path: Path, raw: bytes, fail: Fail, exit_invalid: int) -> UnverifiedDRACheckpoint:
    try:
        return decode_dra_unverified(raw)
    except CheckpointError as err:
        fail(f"error: {path}: {err}", exit_invalid)


def _format(found: UnverifiedDRACheckpoint) -> str:
    if found.list_key is None:
        return "DRA checkpoint without a claim list"
    era = " (v1.31)" if found.list_key == D1_LIST_KEY else ""
    return f"DRA checkpoint, {found.list_key}{era}"


def verify(path: Path, raw: bytes, fail: Fail, exit_invalid: int) -> None:
    try:
        # The kubelet's order: the outer document, its checksum, then the claims.
        decode_dra(raw)
    except CorruptDRACheckpointError as err:
        # The kubelet's text, then the numbers a person needs.
        fail(
            f"error: {path}: {err}: file says {err.found}, the CRC-32 of Data is {err.expected}",
            exit_invalid,
        )
    except CheckpointError as err:
        fail(f"error: {path}: {err}", exit_invalid)
    found = _decode(path, raw, fail, exit_invalid)
    claims = found.data.claims or ()
    typer.echo(f"OK: checksum {found.checksum}, {len(claims)} claims, {_format(found)}")


def _device_json(device: DRADevice) -> dict[str, object]:
    return {
        "pool": device.pool_name,
        "device": device.device_name,
        "requestNames": None if device.request_names is None else list(device.request_names),
        "cdiDeviceIDs": None if device.cdi_device_ids is None else list(device.cdi_device_ids),
        "shareID": device.share_id,
    }


def _claim_json(claim: ClaimInfoState) -> dict[str, object]:
    drivers = claim.driver_state
    return {
        "namespace": claim.namespace,
        "name": claim.claim_name,
        "uid": claim.claim_uid,
        "podUIDs": None if claim.pod_uids is None else sorted(claim.pod_uids),
        "drivers": None
        if drivers is None
        else {
            name: None if devices is None else [_device_json(d) for d in devices]
            for name, devices in sorted(drivers.items())
        },
    }


def inspection_json(path: Path, found: UnverifiedDRACheckpoint) -> dict[str, object]:
    claims = found.data.claims
    return {
        "path": str(path),
        "format": "dra_manager_state",
        "listKey": found.list_key,
        "checksum": {"found": found.checksum, "computed": found.computed_checksum, "valid": found.valid},
        "claims": None if claims is None else [_claim_json(c) for c in claims],
    }


def _devices_text(devices: tuple[DRADevice, ...] | None) -> Text:
    if devices is None:
        return Text("(none)", style="dim")
    lines = []
    for device in devices:
        lines.append(f"{device.pool_name}/{device.device_name}")
        if device.request_names is not None:
            lines.append("  requests: " + ", ".join(device.request_names))
        # One CDI ID a line: they are long, and a table cell folds a joined list mid-ID.
        lines.extend(f"  cdi: {cdi}" for cdi in device.cdi_device_ids or ())
        if device.share_id is not None:
            lines.append(f"  share: {device.share_id}")
    return Text("\n".join(lines) or "(empty)")


def _print(path: Path, found: UnverifiedDRACheckpoint) -> None:
    console = make_console(highlight=False)
    console.print(Text(f"DRA checkpoint {path}"), style="bold")
    console.print(Text(_format(found).removeprefix("DRA checkpoint, ")))
    if found.valid:
        console.print(Text(f"checksum {found.checksum} (CRC-32): valid", style="green"))
    else:
        text = (
            f"checksum INVALID: file says {found.checksum}, the CRC-32 of Data is {found.computed_checksum}"
        )
        console.print(Text(text, style="bold red"))
    table = Table(title="Claims", title_justify="left")
    for column in ("Claim", "UID", "Pods", "Driver", "Devices"):
        table.add_column(column, overflow="fold")
    for claim in found.data.claims or ():
        pods = "(null)" if claim.pod_uids is None else "\n".join(sorted(claim.pod_uids)) or "(none)"
        drivers = sorted((claim.driver_state or {}).items())
        first: list[Text] = [Text(claim.key), Text(claim.claim_uid), Text(pods)]
        if not drivers:
            table.add_row(*first, Text("(null)" if claim.driver_state is None else "(none)", style="dim"))
        for i, (driver, devices) in enumerate(drivers):
            table.add_row(*(first if i == 0 else [Text("")] * 3), Text(driver), _devices_text(devices))
    if found.data.claims is None:
        table.caption = "null: no claim"
    console.print(table)


def inspect(path: Path, raw: bytes, as_json: bool, fail: Fail, exit_invalid: int) -> None:
    found = _decode(path, raw, fail, exit_invalid)
    if as_json:
        sys.stdout.write(json.dumps(inspection_json(path, found), indent=2, ensure_ascii=False) + "\n")
    else:
        _print(path, found)
    if not found.valid:
        raise typer.Exit(exit_invalid)
