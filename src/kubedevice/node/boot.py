"""Which boot of the machine this is, so the daemon can tell its own restart from a node reboot.

After a daemon restart the containers are still running and keep their devices unchecked (the
kubelet's fast path); after a reboot nothing runs, and the kubelet admits every pod again with the
registration and health checks, so a pod whose plugin has not come back fails admission.
"""

from __future__ import annotations

from pathlib import Path

#: Linux gives every boot a random UUID here.
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")


def current_boot_id(override: str | None = None, path: Path = BOOT_ID_PATH) -> str:
    """The boot ID: `override` when given (tests simulate reboots), else the kernel's; "" if unknown."""
    if override:
        return override
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
