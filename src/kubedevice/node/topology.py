"""The daemon's topology manager: built from the node's flags and NUMA layout, shown by the status API."""

from __future__ import annotations

import asyncio
from typing import Any

from kubedevice.topology import (
    NUMAInfoError,
    TopologyConfig,
    TopologyConfigError,
    TopologyManager,
    new_manager,
    read_topology,
    synthetic_topology,
)

FLAGS_HINT = (
    "check --topology-manager-policy, --topology-manager-scope, --topology-manager-policy-options "
    "and --numa-nodes"
)


class TopologyStartError(Exception):
    """The topology manager cannot be created: the kubelet would not start either."""


async def build_topology_manager(config: TopologyConfig, numa_nodes: int | None) -> TopologyManager:
    """NewManager over `--numa-nodes N` nodes, or the machine's own layout read from sysfs.

    Its metrics are registered by the caller (`metrics.register`), on a registry made after serving.
    """
    try:
        if numa_nodes is not None:
            machine = synthetic_topology(numa_nodes)
        else:
            machine = await asyncio.to_thread(read_topology)
        return new_manager(machine, config)
    except (TopologyConfigError, NUMAInfoError) as err:
        raise TopologyStartError(f"topology manager: {err} — {FLAGS_HINT}") from None


def topology_view(tm: TopologyManager, scope: str) -> dict[str, Any]:
    """`status --json`'s topology: policy, scope, options in force and the NUMA nodes with their distances.

    `scope` is the one configured (`--topology-manager-scope`, container or pod): under policy `none` the
    kubelet runs its internal "none" scope instead, which is no value of the flag.
    """
    machine = tm.machine
    options = tm.policy.options
    return {
        "policy": tm.policy.name,
        "scope": scope,
        "options": {
            "prefer-closest-numa-nodes": options.prefer_closest_numa,
            "max-allowable-numa-nodes": options.max_allowable_numa_nodes,
        },
        "numaNodes": [n.id for n in machine.nodes] if machine is not None else [],
        "distances": {
            str(n.id): list(n.distances) if n.distances is not None else None
            for n in (machine.nodes if machine is not None else ())
        },
        "source": machine.source if machine is not None else "",
    }
