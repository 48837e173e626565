"""The checkpoint as JSON, exactly as Go's ``encoding/json`` writes it."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Final

from kubedevice.checkpoint.model import CheckpointData, PodDevicesEntry
from kubedevice.checkpoint.spew import checksum, utf8

# Go escapes control characters, the quote, the backslash, the HTML-sensitive <, > and &, and the JavaScript
# line separators. Python's json module differs (\b, \f, no HTML escaping), so strings are escaped here.
NEEDS_ESCAPE: Final = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029]')
_ESCAPES: Final = {
    **{chr(c): f"\\u{c:04x}" for c in range(0x20)},
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    '"': '\\"',
    "\\": "\\\\",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _escape_match(match: re.Match[str]) -> str:
    return _ESCAPES[match.group()]


def json_str(value: str) -> str:
    if NEEDS_ESCAPE.search(value) is None:
        return '"' + value + '"'
    return '"' + NEEDS_ESCAPE.sub(_escape_match, value) + '"'


def json_strlist(items: Sequence[str] | None) -> str:
    if items is None:
        return "null"
    return "[" + ",".join([json_str(item) for item in items]) + "]"


def _json_device_ids(ids: Mapping[int, Sequence[str] | None] | None) -> str:
    if ids is None:
        return "null"
    # Go sorts map keys by their string form: "-1" < "0" < "10" < "2".
    keys = sorted([str(node) for node in ids])
    return "{" + ",".join([f'"{key}":{json_strlist(ids[int(key)])}' for key in keys]) + "}"


def _json_bytes(raw: bytes | None) -> str:
    return "null" if raw is None else '"' + base64.b64encode(raw).decode("ascii") + '"'


def json_entry(e: PodDevicesEntry) -> str:
    return (
        f'{{"PodUID":{json_str(e.pod_uid)},"ContainerName":{json_str(e.container_name)}'
        f',"ResourceName":{json_str(e.resource_name)},"DeviceIDs":{_json_device_ids(e.device_ids)}'
        f',"AllocResp":{_json_bytes(e.alloc_resp)}}}'
    )


def encode(data: CheckpointData) -> bytes:
    """The checkpoint file's bytes, as the kubelet's ``json.Marshal`` writes them, with the v2 checksum."""
    entries = data.pod_device_entries
    registered = data.registered_devices
    entries_json = "null" if entries is None else "[" + ",".join([json_entry(e) for e in entries]) + "]"
    if registered is None:
        registered_json = "null"
    else:
        registered_json = (
            "{" + ",".join([f"{json_str(r)}:{json_strlist(registered[r])}" for r in sorted(registered)]) + "}"
        )
    text = (
        f'{{"Data":{{"PodDeviceEntries":{entries_json},"RegisteredDevices":{registered_json}}}'
        f',"Checksum":{checksum(data)}}}'
    )
    return utf8(text)
