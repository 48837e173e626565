"""The console script as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubedevice

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")


def test_version() -> None:
    out = subprocess.run([KUBEDEVICE, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"kubedevice {kubedevice.__version__}"
    assert kubedevice.__version__ != "0.0.0+unknown"


def test_help_lists_usage() -> None:
    out = subprocess.run([KUBEDEVICE, "--help"], capture_output=True, text=True, check=True)
    assert "Usage" in out.stdout and "kubedevice" in out.stdout


def test_unknown_command_is_a_usage_error() -> None:
    out = subprocess.run([KUBEDEVICE, "no-such-command"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "no-such-command" in out.stderr
    assert "Traceback" not in out.stderr
