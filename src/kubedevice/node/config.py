"""The node daemon's configuration; its paths, everything under one root folder, are node.paths'.

Also the crash-consistency tests' checkpoint fault hook, read from the environment only (never configuration).
"""

from __future__ import annotations

import os
import random
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kubedevice.api.constants import (
    DRA_BINDING_TIMEOUT_S,
    DRA_RECONCILE_PERIOD_S,
    DRA_WIPE_DELAY_S,
    ENDPOINT_STOP_GRACE_PERIOD_S,
    PRE_START_CONTAINER_TIMEOUT_S,
)
from kubedevice.checkpoint import WRITE_STAGES
from kubedevice.resource.node_labels import node_labels
from kubedevice.statusapi.paths import NodePaths
from kubedevice.topology import TopologyConfig

__all__ = [
    "CHECKPOINT_FAULT_ENV",
    "CLAIM_STATE_FAULT_ENV",
    "DRA_CHECKPOINT_FAULT_ENV",
    "DRA_STATE_RECOVERIES",
    "POD_STATE_FAULT_ENV",
    "TAINT_STATE_FAULT_ENV",
    "DRAStateRecovery",
    "NodeConfig",
    "NodePaths",
    "NodeStartError",
    "checkpoint_fault_from_env",
    "make_dirs",
]

_DIR_MODE = 0o750
#: `--dra-state-recovery`: refuse to start on an unreadable DRA checkpoint, or move it aside and start empty.
DRAStateRecovery = Literal["refuse", "move-aside"]
DRA_STATE_RECOVERIES: tuple[DRAStateRecovery, ...] = ("refuse", "move-aside")
#: Test-only: "STAGE:PROBABILITY:SEED" makes the daemon SIGKILL itself at that stage of checkpoint writes.
CHECKPOINT_FAULT_ENV = "KUBEDEVICE_TEST_CHECKPOINT_FAULT"
#: The same for the DRA manager's checkpoint (dra_manager_state).
DRA_CHECKPOINT_FAULT_ENV = "KUBEDEVICE_TEST_DRA_CHECKPOINT_FAULT"
#: The same for the control plane's claim store (dra_claims.json).
CLAIM_STATE_FAULT_ENV = "KUBEDEVICE_TEST_CLAIM_STATE_FAULT"
#: The same for the pod state file (pod_state.json: an eviction's Failed pod).
POD_STATE_FAULT_ENV = "KUBEDEVICE_TEST_POD_STATE_FAULT"
#: The same for the first sightings of device taints (device_taints.json).
TAINT_STATE_FAULT_ENV = "KUBEDEVICE_TEST_TAINT_STATE_FAULT"


@dataclass(frozen=True, slots=True)
class NodeConfig:
    root_dir: Path
    pod_manifest_path: Path | None = None
    stop_grace_period: float = ENDPOINT_STOP_GRACE_PERIOD_S
    #: Also serve the status API on this TCP address.
    http_addr: tuple[str, int] | None = None
    #: How long a new pod may wait for its plugins and healthy devices before admission is tried.
    admission_wait: float = 0.0
    allow_symlinks: bool = False
    #: How often the manifest folder is looked at where inotify cannot be used.
    scan_interval: float = 0.2
    #: A full scan this often even with inotify (events can be lost), as the kubelet's file source does.
    rescan_interval: float = 20.0
    #: False polls the manifest folder every `scan_interval` (for filesystems where inotify says nothing).
    use_inotify: bool = True
    #: Deadline of each Allocate, GetPreferredAllocation and PreStartContainer call (the kubelet's
    #: PreStartContainer deadline; Allocate has none in the kubelet, so a hung plugin would block forever).
    plugin_timeout: float = PRE_START_CONTAINER_TIMEOUT_S
    #: How often capacity is recomputed, as the kubelet's node status loop does (drops expired resources).
    status_interval: float = 1.0
    #: This boot's ID instead of the kernel's; a different one than last time means the node rebooted.
    boot_id: str | None = None
    #: The kubelet's topology manager policy, scope and policy options.
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    #: Pretend the machine has this many NUMA nodes (distance 10 local, 20 remote) instead of reading sysfs.
    numa_nodes: int | None = None
    #: The node's name: the `spec.nodeName` DRA plugins publish their ResourceSlices for.
    node_name: str = field(default_factory=lambda: socket.gethostname().strip().lower())
    #: `--node-labels`: the node's labels besides `kubernetes.io/hostname` (which one given here replaces).
    node_labels: Mapping[str, str] = field(default_factory=dict)
    #: What an unreadable DRA checkpoint does at start: refuse the start, or move the file aside.
    dra_state_recovery: DRAStateRecovery = "refuse"
    #: How often the DRA manager unprepares the claims of pods that are gone (the kubelet's 60 s).
    dra_reconcile_period: float = DRA_RECONCILE_PERIOD_S
    #: How long a DRA driver whose last plugin went away keeps its ResourceSlices (the kubelet's 30 s).
    dra_wipe_delay: float = DRA_WIPE_DELAY_S
    #: How often a pod waiting for its claims tries again when nothing relevant changed.
    dra_retry_period: float = 10.0
    #: How long a pod waits for the binding conditions of its allocated devices before the allocation is
    #: undone and made again (the scheduler's `bindingTimeout`, 600 s).
    dra_binding_timeout: float = DRA_BINDING_TIMEOUT_S

    @property
    def labels(self) -> dict[str, str]:
        """The node's labels, matched by the node selectors of ResourceSlices: `kubernetes.io/hostname`
        set to the node's name, then `node_labels`."""
        return node_labels(self.node_name, self.node_labels)


class NodeStartError(Exception):
    """The daemon cannot start; str() is one line naming what is wrong."""


def checkpoint_fault_from_env(
    env: Mapping[str, str], name: str = CHECKPOINT_FAULT_ENV
) -> Callable[[str], None] | None:
    """The crash-consistency tests' hook: kill this process inside a checkpoint write, seeded.

    Test-only and never configuration, hence an environment variable rather than a flag. A malformed
    value is a ValueError (the daemon refuses to start) rather than a test that silently kills nothing.
    """
    spec = env.get(name)
    if not spec:
        return None
    stage, _, rest = spec.partition(":")
    probability_text, _, seed_text = rest.partition(":")
    try:
        probability, seed = float(probability_text), int(seed_text)
    except ValueError:
        probability, seed = -1.0, 0
    if stage not in (*WRITE_STAGES, "any") or not 0.0 <= probability <= 1.0:
        raise ValueError(
            f"{name}={spec!r}: want STAGE:PROBABILITY:SEED with STAGE one of "
            f"{', '.join((*WRITE_STAGES, 'any'))} and PROBABILITY from 0 to 1"
        )
    rng = random.Random(seed)

    def fault(at: str) -> None:
        if stage in (at, "any") and rng.random() < probability:
            os.kill(os.getpid(), signal.SIGKILL)

    return fault


def make_dirs(paths: NodePaths) -> list[Path]:
    """Create the daemon's folders; return those that did not exist (the daemon says so)."""
    created = []
    for directory in (
        paths.root,
        paths.plugin_dir,
        paths.plugins_registry,
        paths.pod_resources_socket.parent,
        paths.manifests,
        paths.resourceslices,
    ):
        if not directory.is_dir():
            created.append(directory)
        directory.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    for directory in (
        paths.root,
        paths.plugin_dir,
        paths.plugins_registry,
        paths.pod_resources_socket.parent,
    ):
        os.chmod(directory, _DIR_MODE)
    return created
