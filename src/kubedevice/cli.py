"""The `kubedevice` command: one entry point, a sub-command per tool.

Each tool's commands are imported only when they run: `kubedevice plugin fake` never loads the node daemon,
`kubedevice node` never loads the plugin SDK or the conformance checker, and `kubedevice --help` lists the
tools from the table below without importing any of them. `--version` answers before typer is imported.
Start-up time matters here: the daemon restarting is the kubelet restarting, plugins are started by the
hundred in tests, and `status` is what a script runs in a loop.
"""

from __future__ import annotations

import sys

#: What `kubedevice --help` says the command is.
DESCRIPTION = "The Kubernetes device plugin framework: node daemon, plugin SDK and tools."


class Subcommand:
    """A tool's command, known without importing it. (A plain class: `--version` imports not even typing.)"""

    __slots__ = ("module", "summary")

    def __init__(self, module: str, summary: str) -> None:
        #: The module that adds the command, by a `register(app)` function or, failing that, as its `app`.
        self.module = module
        #: The first line of the command's own help, listed by `kubedevice --help` (a test keeps them equal).
        self.summary = summary


SUBCOMMANDS: dict[str, Subcommand] = {
    "checkpoint": Subcommand(
        "kubedevice.checkpoint.cli",
        "Inspect and verify a checkpoint file: kubelet_internal_checkpoint (v2, and the pre-1.20 v1) "
        "or dra_manager_state (recognised by its content).",
    ),
    "claims": Subcommand(
        "kubedevice.client.claims_cli",
        "The node's ResourceClaims: allocation, reservation, prepared or not, CDI devices, pods.",
    ),
    "conformance": Subcommand(
        "kubedevice.conformance.cli",
        "Check a device plugin or DRA driver the way a kubelet would meet it, in seconds, without a cluster.",
    ),
    "demo": Subcommand(
        "kubedevice.node.cli",
        "Play the node's stories with real processes: admission, restarts, a plugin death, DRA claims.",
    ),
    "exporter": Subcommand(
        "kubedevice.exporter.cli",
        "Export which pod holds which device-plugin device, allocatable and free devices, checkpoint health.",
    ),
    "node": Subcommand(
        "kubedevice.node.cli",
        "Run the node daemon: device manager, pods from manifests, PodResources and the status API.",
    ),
    "plugin": Subcommand(
        "kubedevice.plugin.cli", "Run a ready device plugin beside a kubelet (or kubedevice's node daemon)."
    ),
    "podresources": Subcommand(
        "kubedevice.client.podresources_cli",
        "Ask a PodResources v1 socket (the node daemon's, or a real kubelet's) what pods hold.",
    ),
    "pods": Subcommand(
        "kubedevice.client.cli",
        "The node's pods: phase, devices and run options per container, and manifests that could not be "
        "read.",
    ),
    "status": Subcommand(
        "kubedevice.client.cli",
        "The node's device-plugin resources and DRA drivers: capacity, allocatable, devices, endpoints.",
    ),
    "top": Subcommand(
        "kubedevice.top.cli",
        "Live view of the node's devices per resource and NUMA node: free, held (by which pod), unhealthy.",
    ),
}


def run() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"]:
        from kubedevice import __version__

        print(f"kubedevice {__version__}")
        sys.exit(0)
    from kubedevice.cli_group import run as run_group

    run_group()
