"""The go-spew ``%#v`` text of a checkpoint and its FNV-1a 32 checksum, exactly as the kubelet computes them.

Byte for byte what the kubelet hashes, so a file we write verifies in a real kubelet and back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Protocol

import fnv_c

from kubedevice.checkpoint.model import CheckpointData


class EntryView(Protocol):
    """What the spew and JSON writers read from an entry: the public dataclass or the decoder's own."""

    @property
    def pod_uid(self) -> str: ...
    @property
    def container_name(self) -> str: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def device_ids(self) -> Mapping[int, Sequence[str] | None] | Sequence[str] | None: ...
    @property
    def alloc_resp(self) -> bytes | None: ...


SPEW_HEAD: Final = "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)"
SPEW_REG: Final = " RegisteredDevices:(map[string][]string)"


def spew_strlist(items: Sequence[str] | None) -> str:
    return "<nil>" if items is None else "[" + " ".join(items) + "]"


def spew_device_ids(ids: Mapping[int, Sequence[str] | None] | Sequence[str] | None, v1: bool) -> str:
    if v1:
        if isinstance(ids, Mapping):
            # The v1 format has no topology: the lists of all NUMA nodes, in node order, make one list.
            ids = [dev for node in sorted(ids) for dev in ids[node] or ()]
        return "([]string)" + spew_strlist(ids)
    if ids is None:
        return "(checkpoint.DevicesPerNUMA)<nil>"
    if not isinstance(ids, Mapping):
        raise TypeError("v2 device IDs must map NUMA node to device IDs")
    if len(ids) == 1:
        # Nearly every entry has its devices on one NUMA node: no sort, no generator (10^4 per restart).
        ((node, devices),) = ids.items()
        return f"(checkpoint.DevicesPerNUMA)map[{node}:{spew_strlist(devices)}]"
    return (
        "(checkpoint.DevicesPerNUMA)map["
        + " ".join(f"{node}:{spew_strlist(ids[node])}" for node in sorted(ids))
        + "]"
    )


_DECIMAL: Final = [str(byte) for byte in range(256)]


def spew_bytes(raw: bytes | None) -> str:
    # go-spew prints []uint8 as decimal numbers. A lookup table is the fastest way found to do that in
    # Python for one value; many values at once go through spew_bytes_each.
    if raw is None:
        return "<nil>"
    decimal = _DECIMAL
    return "[" + " ".join([decimal[byte] for byte in raw]) + "]"


# Translation tables giving each byte's hundreds, tens and ones digit; NUL stands for a leading zero.
_HUNDREDS: Final = bytes(0x30 + b // 100 if b >= 100 else 0 for b in range(256))
_TENS: Final = bytes(0x30 + b // 10 % 10 if b >= 10 else 0 for b in range(256))
_ONES: Final = bytes(0x30 + b % 10 for b in range(256))
#: Marks the end of one value's text; never a digit or a space.
_END: Final = ord("|")


def spew_bytes_each(raws: Sequence[bytes | None]) -> list[str]:
    """:func:`spew_bytes` of every value, 3-4x faster for many values (a restart hashes ~10^6 bytes).

    All the bytes are rendered together in C-level passes: each byte gets four slots (hundreds, tens,
    ones, space) filled by `bytes.translate`, the slots of leading zeros are deleted in one more pass, and
    the text is cut where each value's last slot was marked.
    """
    filled = [raw for raw in raws if raw]
    joined = b"".join(filled)
    count = len(joined)
    slots = bytearray(4 * count)
    slots[0::4] = joined.translate(_HUNDREDS)
    slots[1::4] = joined.translate(_TENS)
    slots[2::4] = joined.translate(_ONES)
    slots[3::4] = b" " * count
    end = 0
    for raw in filled:
        end += 4 * len(raw)
        slots[end - 1] = _END
    texts = iter(slots.translate(None, b"\0").decode("ascii").split("|"))
    return ["<nil>" if raw is None else f"[{next(texts)}]" if raw else "[]" for raw in raws]


def spew_document(
    entries: Iterable[EntryView] | None, registered: Mapping[str, Sequence[str] | None] | None, v1: bool
) -> bytes:
    parts = [SPEW_HEAD]
    if entries is None:
        parts.append("<nil>")
    else:
        entries = list(entries)
        responses = spew_bytes_each([e.alloc_resp for e in entries])
        parts.append(
            "["
            + " ".join(
                [
                    f"{{PodUID:(string){e.pod_uid} ContainerName:(string){e.container_name}"
                    f" ResourceName:(string){e.resource_name} DeviceIDs:{spew_device_ids(e.device_ids, v1)}"
                    f" AllocResp:([]uint8){response}}}"
                    for e, response in zip(entries, responses, strict=True)
                ]
            )
            + "]"
        )
    parts.append(SPEW_REG)
    if registered is None:
        parts.append("<nil>")
    else:
        parts.append(
            "map[" + " ".join([f"{r}:{spew_strlist(registered[r])}" for r in sorted(registered)]) + "]"
        )
    parts.append("}")
    return utf8("".join(parts))


def utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be UTF-8. Go would write U+FFFD for it, so both the hashed text and the
        # JSON use U+FFFD and the file still verifies after a round trip.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def spew_text(data: CheckpointData, *, v1: bool = False) -> bytes:
    """The go-spew ``%#v`` text the kubelet hashes (§7.4); ``v1`` gives the pre-1.20 text.

    For ``v1`` the device IDs of all NUMA nodes are flattened in node order into the v1 list.
    """
    return spew_document(data.pod_device_entries, data.registered_devices, v1)


def checksum(data: CheckpointData, *, v1: bool = False) -> int:
    """FNV-1a 32 of :func:`spew_text`: the value the kubelet stores in ``Checksum``."""
    return int(fnv_c.fnv1a_32(spew_document(data.pod_device_entries, data.registered_devices, v1)))
