"""How the API server validates a claim's `status.devices` (pkg/apis/resource/validation:
validateDeviceStatus, metav1 ValidateConditions, validateNetworkDeviceData, validateRawExtension), rule for
rule, each refusal in its words and with its field path.

An entry must name a device (and share) of the claim's allocation, once; its conditions are metav1
Conditions (at most 8); `data` is a JSON object of at most 10 KiB; `networkData` has an interface name of at
most 256 bytes, a hardware address of at most 128 and at most 16 distinct IP addresses in canonical CIDR form.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from kubedevice.resource.device_status import (
    AllocatedDeviceStatus,
    DeviceCondition,
    DeviceStatusKey,
    NetworkDeviceData,
    data_size,
)
from kubedevice.resource.field_errors import FieldError, Shown, path
from kubedevice.resource.model import AllocationResult
from kubedevice.resource.names import dns_label_errors, dns_subdomain_errors, qualified_name_errors

__all__ = [
    "MAX_CONDITIONS",
    "MAX_DATA_BYTES",
    "MAX_HARDWARE_ADDRESS_BYTES",
    "MAX_INTERFACE_NAME_BYTES",
    "MAX_IPS",
    "allocated_keys",
    "driver_name_errors",
    "pool_name_errors",
    "shared_device_id",
    "validate_device_statuses",
]

#: resource/v1's AllocatedDeviceStatusMaxConditions, ...DataMaxLength, NetworkDeviceData* limits.
MAX_CONDITIONS = 8
MAX_DATA_BYTES = 10 * 1024
MAX_IPS = 16
MAX_INTERFACE_NAME_BYTES = 256
MAX_HARDWARE_ADDRESS_BYTES = 128
#: metav1 validation's limits of a condition's reason and message, and the statuses it supports (sorted).
_MAX_REASON_BYTES = 1024
_MAX_MESSAGE_BYTES = 32 * 1024
_CONDITION_STATUSES = ("False", "True", "Unknown")
_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_REASON_TEXT = (
    "a condition reason must start with alphabetic character, optionally followed by a string of "
    "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  "
    "or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
    f"'{_REASON.pattern}')"
)
#: The CSI driver name rule resource/v1 reuses for a driver name, and a pool name's length.
_MAX_DRIVER_BYTES = 63
_MAX_POOL_BYTES = 253
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def shared_device_id(key: DeviceStatusKey) -> str:
    """`driver/pool/device[/shareID]`, structured.SharedDeviceID's String()."""
    return "/".join(part for i, part in enumerate(key) if i < 3 or part)


def allocated_keys(allocation: AllocationResult | None) -> frozenset[DeviceStatusKey]:
    """The (driver, pool, device, shareID) of each allocation result: what a status entry may name."""
    if allocation is None:
        return frozenset()
    return frozenset((r.driver, r.pool, r.device, r.share_id or "") for r in allocation.results)


def validate_device_statuses(
    entries: Sequence[AllocatedDeviceStatus],
    allocation: AllocationResult | None,
    where: str = "status.devices",
) -> list[FieldError]:
    """Every refusal of `entries` as the claim's `status.devices`, in the API server's order: each entry's
    own, then the repeated keys. Empty when the API server would take them."""
    allocated = allocated_keys(allocation)
    errors: list[FieldError] = []
    for i, entry in enumerate(entries):
        errors.extend(_entry(entry, path(where, i), allocated))
    seen: set[DeviceStatusKey] = set()
    for i, entry in enumerate(entries):
        if entry.key in seen:
            errors.append(FieldError.duplicate(path(where, i), Shown(shared_device_id(entry.key))))
        seen.add(entry.key)
    return errors


def _entry(
    entry: AllocatedDeviceStatus, where: str, allocated: frozenset[DeviceStatusKey]
) -> list[FieldError]:
    errors = driver_name_errors(entry.driver, path(where, "driver"))
    errors += pool_name_errors(entry.pool, path(where, "pool"))
    errors += [
        FieldError.invalid(path(where, "device"), entry.device, m) for m in dns_label_errors(entry.device)
    ]
    if entry.share_id is not None:
        errors += _uid(entry.share_id, path(where, "shareID"))
    if entry.key not in allocated:
        errors.append(
            FieldError.invalid(
                where, Shown(shared_device_id(entry.key)), "must be an allocated device in the claim"
            )
        )
    conditions = path(where, "conditions")
    if len(entry.conditions) > MAX_CONDITIONS:
        errors.append(FieldError.too_many(conditions, len(entry.conditions), MAX_CONDITIONS))
    errors += _conditions(entry.conditions, conditions)
    if entry.data is not None:
        errors += _data(entry.data, path(where, "data"))
    if entry.network_data is not None:
        errors += _network(entry.network_data, path(where, "networkData"))
    return errors


def driver_name_errors(name: str, where: str) -> list[FieldError]:
    """ValidateCSIDriverName: required, at most 63 bytes, a DNS subdomain once lower-cased."""
    errors = [FieldError.required(where)] if not name else []
    if len(name.encode()) > _MAX_DRIVER_BYTES:
        errors.append(FieldError.too_long(where, _MAX_DRIVER_BYTES))
    return errors + [FieldError.invalid(where, name, m) for m in dns_subdomain_errors(name.lower())]


def pool_name_errors(name: str, where: str) -> list[FieldError]:
    """validatePoolName: required, at most 253 bytes, DNS subdomains separated by slashes."""
    if not name:
        return [FieldError.required(where)]
    errors = [FieldError.too_long(where, _MAX_POOL_BYTES)] if len(name.encode()) > _MAX_POOL_BYTES else []
    for part in name.split("/"):
        errors += [FieldError.invalid(where, part, m) for m in dns_subdomain_errors(part)]
    return errors


def _uid(uid: str, where: str) -> list[FieldError]:
    """validateUID: what google/uuid parses, then only its normalized lower-case form."""
    problem = _uuid_problem(uid)
    if problem is not None:
        return [FieldError.invalid(where, uid, f"error validating uid: {problem}")]
    if len(uid) != 36 or uid != uid.lower():
        return [
            FieldError.invalid(
                where,
                uid,
                "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with "
                "lowercase hexadecimal characters",
            )
        ]
    return []


def _uuid_problem(text: str) -> str | None:
    """google/uuid's Validate: the four forms it reads, else its error."""
    size = len(text)
    if size == 36:
        body = text
    elif size == 38:
        body = text[1:-1] if text[0] == "{" and text[-1] == "}" else ""
    elif size == 45:
        body = text[9:] if text[:9].lower() == "urn:uuid:" else ""
    elif size == 32:
        return None if re.fullmatch(r"[0-9a-fA-F]{32}", text) else "invalid UUID format"
    else:
        return f"invalid UUID length: {size}"
    return None if _UUID.fullmatch(body) else "invalid UUID format"


def _conditions(conditions: Sequence[DeviceCondition], where: str) -> list[FieldError]:
    """metav1 ValidateConditions: each type once, each condition valid."""
    errors: list[FieldError] = []
    types: set[str] = set()
    for i, condition in enumerate(conditions):
        at = path(where, i)
        if condition.type in types:
            errors.append(FieldError.duplicate(path(at, "type"), condition.type))
        types.add(condition.type)
        errors += _condition(condition, at)
    return errors


def _condition(c: DeviceCondition, where: str) -> list[FieldError]:
    """metav1 ValidateCondition."""
    errors = [FieldError.invalid(path(where, "type"), c.type, m) for m in qualified_name_errors(c.type)]
    if c.status not in _CONDITION_STATUSES:
        errors.append(FieldError.not_supported(path(where, "status"), c.status, _CONDITION_STATUSES))
    if c.observed_generation < 0:
        errors.append(
            FieldError.invalid(
                path(where, "observedGeneration"),
                c.observed_generation,
                "must be greater than or equal to zero",
            )
        )
    if not c.last_transition_time:
        errors.append(FieldError.required(path(where, "lastTransitionTime"), "must be set"))
    reason = path(where, "reason")
    if not c.reason:
        errors.append(FieldError.required(reason, "must be set"))
    else:
        if _REASON.fullmatch(c.reason) is None:
            errors.append(FieldError.invalid(reason, c.reason, _REASON_TEXT))
        if len(c.reason.encode()) > _MAX_REASON_BYTES:
            errors.append(FieldError.too_long(reason, _MAX_REASON_BYTES))
    if len(c.message.encode()) > _MAX_MESSAGE_BYTES:
        errors.append(FieldError.too_long(path(where, "message"), _MAX_MESSAGE_BYTES))
    return errors


def _data(data: object, where: str) -> list[FieldError]:
    """validateRawExtension of a new status: at most 10 KiB, and a JSON object."""
    if data_size(data) > MAX_DATA_BYTES:
        return [FieldError.too_long(where, MAX_DATA_BYTES)]
    if not isinstance(data, dict):
        return [FieldError.invalid(where, "<value omitted>", "must be a valid JSON object")]
    return []


def _network(network: NetworkDeviceData, where: str) -> list[FieldError]:
    """validateNetworkDeviceData: the lengths, then the IPs as a set of at most 16 interface addresses."""
    errors: list[FieldError] = []
    if len(network.interface_name.encode()) > MAX_INTERFACE_NAME_BYTES:
        errors.append(FieldError.too_long(path(where, "interfaceName"), MAX_INTERFACE_NAME_BYTES))
    if len(network.hardware_address.encode()) > MAX_HARDWARE_ADDRESS_BYTES:
        errors.append(FieldError.too_long(path(where, "hardwareAddress"), MAX_HARDWARE_ADDRESS_BYTES))
    ips = path(where, "ips")
    if len(network.ips) > MAX_IPS:
        # The size check short-circuits, as the API server's does (no walk over a huge list).
        return [*errors, FieldError.too_many(ips, len(network.ips), MAX_IPS)]
    for i, ip in enumerate(network.ips):
        problem = interface_address_problem(ip)
        if problem is not None:
            errors.append(FieldError.invalid(path(ips, i), ip, problem))
    seen: set[str] = set()
    for i, ip in enumerate(network.ips):
        if ip in seen:
            errors.append(FieldError.duplicate(path(ips, i), ip))
        seen.add(ip)
    return errors


def interface_address_problem(value: str) -> str | None:
    """apimachinery's IsValidInterfaceAddress: an address and its prefix length in CIDR form, written as Go
    writes it back (`10.0.0.5/24`, `2001:db8::5/64`); None when it is one."""
    address, slash, prefix = value.partition("/")
    ip = _go_parse_ip(address)
    if not slash or ip is None or not prefix.isascii() or not prefix.isdigit():
        return "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"
    bits = int(prefix)
    if bits > ip.max_prefixlen:
        return "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"
    shown: ipaddress.IPv4Address | ipaddress.IPv6Address = ip
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        # Go prints a 4-in-6 address as IPv4 and counts its prefix from the IPv4 part.
        shown = ip.ipv4_mapped
        if bits > 32:
            bits -= 96
    canonical = f"{shown}/{bits}"
    return None if value == canonical else f'must be in canonical form ("{canonical}")'


def _go_parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """netutils.ParseIPSloppy: IPv4 octets may have leading zeros (read as decimal); no zone."""
    if "%" in text:
        return None
    if ":" not in text:
        octets = text.split(".")
        if len(octets) != 4 or not all(o.isascii() and o.isdigit() and 0 < len(o) <= 3 for o in octets):
            return None
        if any(int(o) > 255 for o in octets):
            return None
        return ipaddress.IPv4Address(".".join(str(int(o)) for o in octets))
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None
