"""Kubernetes' name rules (apimachinery's validation): DNS-1123 labels and subdomains, qualified names and
extended resource names. One copy, used by the documents' validation, the device manager's registration and
the plugin SDK's own early checks."""

from __future__ import annotations

import re

__all__ = [
    "DNS_SUBDOMAIN",
    "QUALIFIED_NAME",
    "REQUESTS_PREFIX",
    "is_dns_label",
    "is_dns_subdomain",
    "is_extended_resource_name",
    "is_qualified_name",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(_LABEL)
DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
#: The name part of a qualified name (1-63 characters, checked apart).
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
#: Quota's prefix: an extended resource name must still be a qualified name behind it.
REQUESTS_PREFIX = "requests."


def is_dns_label(name: str) -> bool:
    return len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name) is not None


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
    """Kubernetes' IsValidLabelValue: empty, or at most 63 characters of a qualified name's part."""
    return value == "" or (len(value) <= 63 and QUALIFIED_NAME.fullmatch(value) is not None)


def is_extended_resource_name(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: `vendor.domain/name`, not native, not `requests.`."""
    if "/" not in name or "kubernetes.io/" in name:
        return False
    if name.startswith(REQUESTS_PREFIX):
        return False
    return is_qualified_name(REQUESTS_PREFIX + name)
