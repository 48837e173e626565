"""The `kubedevice` command's tools: each one's module and one-line help, known without importing it.

`kubedevice --help` lists the tools from this table and imports none of them; the typer group
(:mod:`kubedevice.cli_group`) imports a tool's module only when its command runs. A test keeps each
summary equal to the first line of the tool's own help.
"""

from __future__ import annotations

#: What `kubedevice --help` says the command is.
DESCRIPTION = "The Kubernetes device plugin framework: node daemon, plugin SDK and tools."


class Subcommand:
    """A tool's command, known without importing it."""

    __slots__ = ("module", "summary")

    def __init__(self, module: str, summary: str) -> None:
        #: The module that adds the command, by a `register(app)` function or, failing that, as its `app`.
        self.module = module
        #: The first line of the command's own help, listed by `kubedevice --help` (a test keeps them equal).
        self.summary = summary


SUBCOMMANDS: dict[str, Subcommand] = {
    "allocate": Subcommand(
        "kubedevice.client.allocate",
        "The allocation the scheduler would make for unallocated claims, from files, or why there is none.",
    ),
    "checkpoint": Subcommand(
        "kubedevice.checkpoint.cli",
        "Inspect and verify a checkpoint file: kubelet_internal_checkpoint (v2, and the pre-1.20 v1) "
        "or dra_manager_state (recognised by its content).",
    ),
    "claims": Subcommand(
        "kubedevice.client.cli",
        "The node's ResourceClaims: allocation, reservation, prepared or not, CDI devices, pods, device "
        "status.",
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
        "kubedevice.client.podresources.cli",
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
