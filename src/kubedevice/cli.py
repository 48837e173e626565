"""The `kubedevice` command: one entry point, a sub-command per tool.

Each tool's commands are imported only when they run: `kubedevice plugin fake` never loads the node daemon,
`kubedevice node` never loads the plugin SDK or the conformance checker, and `kubedevice --help` lists the
tools from their table (:mod:`kubedevice.tools`) without importing any of them. `--version` answers before
typer is imported.
Start-up time matters here: the daemon restarting is the kubelet restarting, plugins are started by the
hundred in tests, and `status` is what a script runs in a loop.
"""

from __future__ import annotations

import sys


def run() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"]:
        from kubedevice import __version__

        print(f"kubedevice {__version__}")
        sys.exit(0)
    from kubedevice.cli_group import run as run_group

    run_group()
