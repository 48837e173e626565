"""Reading the DRA checkpoint's inner JSON with Go's ``encoding/json`` rules, into :mod:`.dra_model`.

The kubelet decodes ``Data`` into ``{TypeMeta; ClaimInfoStateList []ClaimInfoState}``. As in
:mod:`.json_reader`: keys match fields exactly and then case-insensitively, unknown keys are skipped, null
into a string or struct changes nothing, null into a slice, map or pointer makes it nil, a repeated key is
decoded again in place (a map keeps its entries, a slice reuses its elements), and a value of the wrong
type is an error naming where it is. Go starts each map value from zero, so a driver's state never merges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from kubedevice.checkpoint.dra_model import ClaimInfoState, DRACheckpointData, DRADevice
from kubedevice.checkpoint.json_reader import GoStrings, JSONObject, match_field, type_error

#: The list key of every kubelet from v1.32 on, and the one we write.
LIST_KEY: Final = "ClaimInfoStateList"
#: The list key of the first CRC-32 format (v1.31), still read.
D1_LIST_KEY: Final = "Entries"

_TOP_FIELDS: Final = ("kind", "apiVersion", LIST_KEY, D1_LIST_KEY)
_CLAIM_FIELDS: Final = ("ClaimUID", "ClaimName", "Namespace", "PodUIDs", "DriverState")
_DEVICE_FIELDS: Final = ("PoolName", "DeviceName", "ShareID", "RequestNames", "CDIDeviceIDs")


@dataclass(slots=True)
class _RawDevice:
    pool_name: str = ""
    device_name: str = ""
    share_id: str | None = None
    request_names: list[str] | None = None
    cdi_device_ids: list[str] | None = None

    def public(self) -> DRADevice:
        return DRADevice(
            self.pool_name,
            self.device_name,
            None if self.request_names is None else tuple(self.request_names),
            None if self.cdi_device_ids is None else tuple(self.cdi_device_ids),
            self.share_id,
        )


@dataclass(slots=True)
class _RawClaim:
    claim_uid: str = ""
    claim_name: str = ""
    namespace: str = ""
    pod_uids: set[str] | None = None
    driver_state: dict[str, list[_RawDevice] | None] | None = None

    def public(self) -> ClaimInfoState:
        drivers = self.driver_state
        return ClaimInfoState(
            self.claim_uid,
            self.claim_name,
            self.namespace,
            None if self.pod_uids is None else frozenset(self.pod_uids),
            None
            if drivers is None
            else {
                name: None if drivers[name] is None else tuple(d.public() for d in drivers[name] or ())
                for name in sorted(drivers)
            },
        )


@dataclass(slots=True)
class _RawData:
    lists: dict[str, list[_RawClaim] | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InnerDocument:
    """The decoded ``Data``: the claims and which list key held them."""

    data: DRACheckpointData
    #: ``ClaimInfoStateList``, ``Entries`` (a v1.31 file), or None when the document has neither.
    list_key: str | None


class DRAReader(GoStrings):
    """Decodes the parsed inner document; ``scrub`` turns lone surrogates into U+FFFD as Go does."""

    def document(self, doc: object) -> InnerDocument:
        raw = _RawData()
        if doc is not None:
            if not isinstance(doc, JSONObject):
                raise type_error("Data", doc, "an object")
            for key, value in doc.pairs:
                name = match_field(key, _TOP_FIELDS)
                if name in ("kind", "apiVersion"):
                    # TypeMeta is decoded but, as in the kubelet, never checked.
                    self.string(value, "", f"Data.{name}")
                elif name is not None:
                    raw.lists[name] = self.claims(value, raw.lists.get(name), f"Data.{name}")
        # Only a file without the current key falls back to the v1.31 one.
        list_key = next((k for k in (LIST_KEY, D1_LIST_KEY) if k in raw.lists), None)
        claims = None if list_key is None else raw.lists[list_key]
        data = DRACheckpointData(None if claims is None else tuple(c.public() for c in claims))
        return InnerDocument(data, list_key)

    def claims(self, value: object, current: list[_RawClaim] | None, path: str) -> list[_RawClaim] | None:
        return _decode_list(value, current, path, "claims", _RawClaim, self.claim)

    def claim(self, value: object, claim: _RawClaim, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, JSONObject):
            raise type_error(path, value, "an object")
        for key, item in value.pairs:
            name = match_field(key, _CLAIM_FIELDS)
            where = f"{path}.{name}"
            if name == "ClaimUID":
                claim.claim_uid = self.string(item, claim.claim_uid, where)
            elif name == "ClaimName":
                claim.claim_name = self.string(item, claim.claim_name, where)
            elif name == "Namespace":
                claim.namespace = self.string(item, claim.namespace, where)
            elif name == "PodUIDs":
                claim.pod_uids = self.pod_uids(item, claim.pod_uids, where)
            elif name == "DriverState":
                claim.driver_state = self.driver_state(item, claim.driver_state, where)

    def pod_uids(self, value: object, current: set[str] | None, path: str) -> set[str] | None:
        if value is None:
            return None
        if not isinstance(value, JSONObject):
            raise type_error(path, value, "an object (a set of pod UIDs)")
        result = set() if current is None else current
        for key, item in value.pairs:
            # A Go set's values are struct{}: any object (its keys are unknown fields) or null.
            if item is not None and not isinstance(item, JSONObject):
                raise type_error(f"{path}[{key!r}]", item, "an empty object")
            result.add(self.string(key, "", path))
        return result

    def driver_state(
        self, value: object, current: dict[str, list[_RawDevice] | None] | None, path: str
    ) -> dict[str, list[_RawDevice] | None] | None:
        if value is None:
            return None
        if not isinstance(value, JSONObject):
            raise type_error(path, value, "an object mapping driver names to their state")
        result = {} if current is None else current
        for key, item in value.pairs:
            where = f"{path}[{key!r}]"
            devices: list[_RawDevice] | None = None
            if item is not None:
                if not isinstance(item, JSONObject):
                    raise type_error(where, item, "an object")
                for state_key, state_value in item.pairs:
                    if match_field(state_key, ("Devices",)) == "Devices":
                        devices = self.devices(state_value, devices, f"{where}.Devices")
            result[self.string(key, "", path)] = devices
        return result

    def devices(self, value: object, current: list[_RawDevice] | None, path: str) -> list[_RawDevice] | None:
        return _decode_list(value, current, path, "devices", _RawDevice, self.device)

    def device(self, value: object, device: _RawDevice, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, JSONObject):
            raise type_error(path, value, "an object")
        for key, item in value.pairs:
            name = match_field(key, _DEVICE_FIELDS)
            where = f"{path}.{name}"
            if name == "PoolName":
                device.pool_name = self.string(item, device.pool_name, where)
            elif name == "DeviceName":
                device.device_name = self.string(item, device.device_name, where)
            elif name == "ShareID":
                # A *types.UID: null makes it nil again.
                device.share_id = None if item is None else self.string(item, "", where)
            elif name == "RequestNames":
                device.request_names = self.strlist(item, device.request_names, where)
            elif name == "CDIDeviceIDs":
                device.cdi_device_ids = self.strlist(item, device.cdi_device_ids, where)


_Item = TypeVar("_Item")


def _decode_list(
    value: object,
    current: list[_Item] | None,
    path: str,
    what: str,
    new: Callable[[], _Item],
    decode: Callable[[object, _Item, str], None],
) -> list[_Item] | None:
    """A JSON array decoded as Go does into a slice: null makes it nil, and each element is decoded into
    the element already at that index (a repeated key decodes in place), else into a new one."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise type_error(path, value, f"an array of {what}")
    old = current or []
    result = []
    for i, item in enumerate(value):
        element = old[i] if i < len(old) else new()
        decode(item, element, f"{path}[{i}]")
        result.append(element)
    return result
