"""The one error a backend raises when it cannot be made or started."""

from __future__ import annotations


class DRABackendError(Exception):
    """The backend cannot be made or started as configured; str() is one line saying what to do.

    The SDK turns it into its start error (`error: <command>: …`, exit code 2).
    """
