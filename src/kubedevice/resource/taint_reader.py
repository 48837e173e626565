"""Reading device taints (a slice device's `taints`, a DeviceTaintRule's `taint`), the tolerations of
requests and DeviceTaintRule documents, checked as the API server checks them (`validateDeviceTaint`,
`validateDeviceToleration`, `validateDeviceTaintRuleSpec`), every refusal naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubedevice.resource.fields import Fields, shown
from kubedevice.resource.model import DeviceTaintRuleDocument, ObjectMeta
from kubedevice.resource.names import is_dns_label, is_dns_subdomain, is_label_value, is_qualified_name
from kubedevice.resource.taints import (
    TAINT_EFFECTS,
    TOLERATION_OPERATORS,
    DeviceTaint,
    DeviceTaintSelector,
    DeviceToleration,
)
from kubedevice.resource.times import parse_time

__all__ = [
    "MAX_TAINTS",
    "MAX_TOLERATIONS",
    "read_taint_rule",
    "read_taints",
    "read_time",
    "read_tolerations",
]

#: The API's limits: taints per device (`DeviceTaintsMaxLength`), tolerations per request.
MAX_TAINTS = 16
MAX_TOLERATIONS = 16
# metav1.Time: RFC 3339, seconds optionally with a fraction, `Z` or an offset.
# Fields a 1.33/1.34 rule could have, dropped since 1.35: a rule using one would taint other devices here.
_REMOVED_SELECTOR_FIELDS = ("deviceClassName", "selectors")


def read_taints(f: Fields, value: Any, path: str) -> tuple[DeviceTaint, ...]:
    return tuple(
        read_taint(f, raw, f"{path}[{i}]") for i, raw in enumerate(f.items(value, path, at_most=MAX_TAINTS))
    )


def read_taint(f: Fields, value: Any, path: str) -> DeviceTaint:
    taint = f.mapping(value, path)
    key = f.string(taint.get("key"), f"{path}.key", required=True)
    if not is_qualified_name(key):
        raise f.error(
            f"{path}.key", f"{shown(key)} is not a label key (a qualified name, e.g. example.com/gpu)"
        )
    raw_value = f.string(taint.get("value"), f"{path}.value")
    _label_value(f, raw_value, f"{path}.value")
    effect = f.string(taint.get("effect"), f"{path}.effect", required=True)
    _effect(f, effect, f"{path}.effect")
    return DeviceTaint(key, effect, raw_value, read_time(f, taint.get("timeAdded"), f"{path}.timeAdded"))


def read_tolerations(f: Fields, value: Any, path: str) -> tuple[DeviceToleration, ...]:
    out: list[DeviceToleration] = []
    for i, raw in enumerate(f.items(value, path, at_most=MAX_TOLERATIONS)):
        at = f"{path}[{i}]"
        toleration = f.mapping(raw, at)
        key = f.string(toleration.get("key"), f"{at}.key")
        if key and not is_qualified_name(key):
            raise f.error(
                f"{at}.key", f"{shown(key)} is not a label key (a qualified name, e.g. example.com/gpu)"
            )
        # The API server defaults an empty operator to Equal before it validates.
        operator = f.string(toleration.get("operator"), f"{at}.operator") or "Equal"
        if operator not in TOLERATION_OPERATORS:
            raise f.error(f"{at}.operator", _unsupported(operator, TOLERATION_OPERATORS))
        raw_value = f.string(toleration.get("value"), f"{at}.value")
        if operator == "Exists" and raw_value:
            raise f.error(f"{at}.value", "must be empty for operator `Exists`")
        _label_value(f, raw_value, f"{at}.value")
        effect = f.string(toleration.get("effect"), f"{at}.effect")
        if effect:
            _effect(f, effect, f"{at}.effect")
        seconds = toleration.get("tolerationSeconds")
        out.append(
            DeviceToleration(
                key,
                operator,
                raw_value,
                effect,
                None if seconds is None else f.integer(seconds, f"{at}.tolerationSeconds", 0),
            )
        )
    return tuple(out)


def read_taint_rule(f: Fields, meta: ObjectMeta, spec: Mapping[str, Any]) -> DeviceTaintRuleDocument:
    """A DeviceTaintRule's spec: its `deviceSelector` (driver, pool, device) and its one `taint`."""
    selector = None
    if spec.get("deviceSelector") is not None:
        raw = f.mapping(spec.get("deviceSelector"), "spec.deviceSelector")
        for name in _REMOVED_SELECTOR_FIELDS:
            if raw.get(name) is not None:
                raise f.error(
                    f"spec.deviceSelector.{name}",
                    "is no longer supported (removed in Kubernetes 1.35): select devices by driver, pool "
                    "and device",
                )
        selector = DeviceTaintSelector(
            driver=_optional(f, raw.get("driver"), "spec.deviceSelector.driver", is_dns_subdomain),
            pool=_pool(f, raw.get("pool"), "spec.deviceSelector.pool"),
            device=_optional(f, raw.get("device"), "spec.deviceSelector.device", is_dns_label),
        )
    if spec.get("taint") is None:
        raise f.error("spec.taint", "is required")
    return DeviceTaintRuleDocument(meta, read_taint(f, spec.get("taint"), "spec.taint"), selector)


def _optional(f: Fields, value: Any, path: str, valid: Any) -> str | None:
    if value is None:
        return None
    text = f.string(value, path, required=True)
    if not valid(text):
        raise f.error(path, f"{shown(text)} is not a valid name")
    return text


def _pool(f: Fields, value: Any, path: str) -> str | None:
    """A pool name: DNS subdomains separated by `/`, at most 253 characters (`validatePoolName`)."""
    if value is None:
        return None
    text = f.string(value, path, required=True)
    if len(text) > 253 or not all(is_dns_subdomain(part) for part in text.split("/")):
        raise f.error(
            path, f"{shown(text)} is not a pool name (DNS subdomains separated by '/', at most 253)"
        )
    return text


def _label_value(f: Fields, value: str, path: str) -> None:
    if not is_label_value(value):
        raise f.error(
            path, f"{shown(value)} is not a label value (letters, digits, '-', '_' and '.', at most 63)"
        )


def _effect(f: Fields, effect: str, path: str) -> None:
    if effect not in TAINT_EFFECTS:
        raise f.error(path, _unsupported(effect, TAINT_EFFECTS))


def _unsupported(value: str, supported: tuple[str, ...]) -> str:
    listed = ", ".join(f'"{s}"' for s in supported)
    return f"Unsupported value: {shown(value)}: supported values: {listed}"


def read_time(f: Fields, value: Any, path: str) -> str | None:
    """A metav1.Time (`timeAdded`, `allocationTimestamp`): RFC 3339, kept as written; None when absent."""
    if value is None:
        return None
    text = f.string(value, path, required=True)
    if parse_time(text) is None:
        raise f.error(path, f"{shown(text)} is not an RFC 3339 time (e.g. 2025-01-02T15:04:05Z)")
    return text
