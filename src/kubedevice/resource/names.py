"""Kubernetes' name rules (apimachinery's validation): DNS-1123 labels and subdomains, qualified names and
extended resource names. One copy, used by the documents' validation, the device manager's registration and
the plugin SDK's own early checks."""

from __future__ import annotations

import re

__all__ = [
    "DNS_SUBDOMAIN",
    "QUALIFIED_NAME",
    "REQUESTS_PREFIX",
    "dns_label_errors",
    "dns_subdomain_errors",
    "is_dns_label",
    "is_dns_subdomain",
    "is_extended_resource_name",
    "is_label_value",
    "is_qualified_name",
    "is_uuid",
    "qualified_name_errors",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(_LABEL)
DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
#: The name part of a qualified name (1-63 characters, checked apart).
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
#: The `k8s-uuid` format (a share ID): lowercase hex digits, 8-4-4-4-12.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Quota's prefix: an extended resource name must still be a qualified name behind it.
REQUESTS_PREFIX = "requests."


def is_dns_label(name: str) -> bool:
    return len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name) is not None


def is_uuid(value: str) -> bool:
    return _UUID.fullmatch(value) is not None


def is_qualified_name(value: str) -> bool:
    """Kubernetes' IsQualifiedName: an optional DNS-1123 subdomain prefix, a name of 1-63 characters."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or not is_dns_subdomain(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """Kubernetes' IsValidLabelValue: empty, or a name of at most 63 characters."""
    return not value or (len(value) <= 63 and QUALIFIED_NAME.fullmatch(value) is not None)


def is_extended_resource_name(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: `vendor.domain/name`, not native, not `requests.`."""
    if "/" not in name or "kubernetes.io/" in name:
        return False
    if name.startswith(REQUESTS_PREFIX):
        return False
    return is_qualified_name(REQUESTS_PREFIX + name)


# --- the failures of those rules as apimachinery words them (IsDNS1123Label, ...Subdomain, IsQualifiedName)

_LABEL_TEXT = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)
_SUBDOMAIN_TEXT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
_QUALIFIED_TEXT = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character"
)


def _regex_error(text: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError, its doubled spaces included: `(e.g. 'a',  or 'b', regex used ...)`."""
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{text} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def dns_label_errors(value: str) -> list[str]:
    """Why `value` is no DNS-1123 label, in apimachinery's words; empty when it is one."""
    errors = [_max_len(63)] if len(value) > 63 else []
    if _DNS_LABEL.fullmatch(value) is None:
        if DNS_SUBDOMAIN.fullmatch(value) is not None:
            errors.append("must not contain dots")
        else:
            errors.append(_regex_error(_LABEL_TEXT, _LABEL, "my-name", "123-abc"))
    return errors


def dns_subdomain_errors(value: str) -> list[str]:
    """Why `value` is no DNS-1123 subdomain, in apimachinery's words; empty when it is one."""
    errors = [_max_len(253)] if len(value) > 253 else []
    if DNS_SUBDOMAIN.fullmatch(value) is None:
        errors.append(_regex_error(_SUBDOMAIN_TEXT, DNS_SUBDOMAIN.pattern, "example.com"))
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """Why `value` is no qualified name (a label key, a condition type), in apimachinery's words."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [
            f"a qualified name {_qualified_regex_error()} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {e}" for e in dns_subdomain_errors(prefix))
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append(f"name part {_max_len(63)}")
    if QUALIFIED_NAME.fullmatch(name) is None:
        errors.append(f"name part {_qualified_regex_error()}")
    return errors


def _qualified_regex_error() -> str:
    return _regex_error(_QUALIFIED_TEXT, QUALIFIED_NAME.pattern, "MyName", "my.name", "123-abc")
