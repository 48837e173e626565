"""CDI names: `vendor/class` kinds, device names and fully qualified `vendor/class=name` IDs.

The rules every CDI consumer (containerd, CRI-O, podman) applies. Shared by the plugin SDK, which writes
CDI specs, and by the node side, which checks the CDI IDs a DRA driver returns before a runtime meets them.
"""

from __future__ import annotations

import re

#: What a CDI vendor name (the part of `kind` before the slash) must match, in full.
VENDOR_NAME = re.compile(r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?")
#: What a CDI class name (the part of `kind` after the slash) must match, in full.
CLASS_NAME = VENDOR_NAME
#: What a CDI device name (the part after `=`) must match, in full.
DEVICE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?")
_NAME_RULE = "start with a letter, use letters, digits, '_', '-', '.', end with a letter or digit"


class CDIError(ValueError):
    """A spec or a name that breaks the CDI rules; the message is one line naming what and where."""


def validate_kind(kind: str) -> tuple[str, str]:
    """``vendor/class`` → (vendor, class), checked."""
    vendor, slash, device_class = kind.partition("/")
    if not slash or not vendor or not device_class:
        raise CDIError(f"CDI kind {kind!r} is not vendor/class — write it as e.g. 'example.com/gpu'")
    if not VENDOR_NAME.fullmatch(vendor):
        raise CDIError(f"CDI vendor {vendor!r} in kind {kind!r} is invalid — {_NAME_RULE}")
    if not CLASS_NAME.fullmatch(device_class):
        raise CDIError(f"CDI class {device_class!r} in kind {kind!r} is invalid — {_NAME_RULE}")
    return vendor, device_class


def validate_device_name(name: str) -> None:
    """Raise CDIError unless `name` is a valid CDI device name."""
    if not DEVICE_NAME.fullmatch(name):
        raise CDIError(
            f"CDI device name {name!r} is invalid — use letters, digits, '_', '-', '.', ':', "
            "starting and ending with a letter or digit"
        )


def parse_qualified_name(name: str) -> tuple[str, str]:
    """``vendor/class=device`` → (kind, device), checked."""
    kind, equals, device = name.partition("=")
    vendor, slash, device_class = kind.partition("/")
    if not equals or not device or not slash or not vendor or not device_class:
        raise CDIError(f"CDI device {name!r} is not fully qualified — write it as vendor/class=name")
    validate_kind(kind)
    validate_device_name(device)
    return kind, device
