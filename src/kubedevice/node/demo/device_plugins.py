"""`kubedevice demo`'s device-plugin stories: two fake plugins on a node of two NUMA nodes (each with two
GPUs and one NIC), pods admitted or refused by the topology manager, a kubelet restart, a plugin's death
and return, and the same node under another policy.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubedevice.node.demo.script import NUMA, Demo, DemoError
from kubedevice.statusapi import contract

GPU = "example.com/gpu"
NIC = "example.com/nic"

_FITS = f"""apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: demo
spec:
  containers:
  - name: train
    resources:
      limits:
        {GPU}: 1
        {NIC}: 1
"""
#: Three GPUs: no single NUMA node of the demo's machine (two GPUs each) can hold them.
_WIDE = f"""apiVersion: v1
kind: Pod
metadata:
  name: wide
  namespace: demo
spec:
  containers:
  - name: main
    resources:
      limits:
        {GPU}: 3
"""


async def start_plugin(demo: Demo, resource: str) -> None:
    """The fake plugin of `resource` on the demo's two NUMA nodes: 4 GPUs (with preferred allocations) or
    2 NICs."""
    name = resource.split("/")[1]
    args = ["plugin", "fake", "--resource", resource, "--plugin-dir", str(demo.paths.plugin_dir)]
    args += ["--devices", "4", *NUMA, "--preferred"] if resource == GPU else ["--devices", "2", *NUMA]
    demo.plugins[resource] = await demo.start(f"plugin-{name}", *args, "--poll-interval", "0.2")


async def trainer_devices(demo: Demo) -> dict[str, Any]:
    """trainer's devices and the NUMA hint the topology manager chose for it."""
    for pod in (await demo.status(contract.PODS))["pods"]:
        if pod.get("name") == "trainer":
            container = pod["containers"][0]
            return {**container["devices"], "hint": container["topologyHint"]}
    raise DemoError("pod demo/trainer is missing from /pods")


async def aligned(demo: Demo, name: str) -> bool:
    """Whether every device of pod `name` is on the single NUMA node of its hint."""
    numa = {r: info["numaNodes"] for r, info in (await demo.status(contract.NODE))["resources"].items()}
    for pod in (await demo.status(contract.PODS))["pods"]:
        if pod.get("name") == name and pod.get("phase") == "Running":
            container = pod["containers"][0]
            nodes = {n for r, ids in container["devices"].items() for d in ids for n in numa[r][d]}
            hint = container["topologyHint"] or {}
            return len(nodes) == 1 and hint.get("numaNodes") == sorted(nodes)
    return False


def _capacity(d: dict[str, Any], resource: str) -> int | None:
    value = d["capacity"].get(resource)
    return int(value) if value is not None else None


async def play_device_plugins(demo: Demo) -> None:
    """Stories 1 to 3, on a daemon this starts: admission, a kubelet restart, a plugin's death, a policy."""
    demo.say(f"Starting the node daemon in {demo.root} and two fake device plugins")
    await demo.start_daemon()
    await start_plugin(demo, GPU)
    await start_plugin(demo, NIC)
    await demo.until(
        "both plugins registered: 4 GPUs on 2 NUMA nodes, 2 NICs",
        lambda: demo.node_has(lambda d: _capacity(d, GPU) == 4 and _capacity(d, NIC) == 2),
    )

    demo.say(
        "The node runs --topology-manager-policy single-numa-node on 2 NUMA nodes (2 GPUs and 1 NIC each). "
        "Dropping two pods into the manifest folder: a GPU + NIC pod, and one asking for 3 GPUs"
    )
    (demo.paths.manifests / "trainer.yaml").write_text(_FITS)
    (demo.paths.manifests / "wide.yaml").write_text(_WIDE)
    await demo.until(
        "trainer is Running with its GPU and NIC on one NUMA node",
        lambda: aligned(demo, "trainer"),
    )
    await demo.until(
        "wide is Failed (TopologyAffinityError): no single NUMA node holds 3 GPUs",
        lambda: demo.pod_is("wide", "Failed", lambda p: p.get("reason") == "TopologyAffinityError"),
    )
    await demo.show(node=True, pods=True)
    before = await trainer_devices(demo)

    demo.say("Story 1: the kubelet restarts. SIGKILL the daemon, start it again")
    await demo.restart_daemon()
    await demo.until(
        "trainer kept its devices and NUMA hint from the checkpoint, without a new allocation",
        lambda: demo.pod_is("trainer", "Running"),
    )
    if await trainer_devices(demo) != before:
        raise DemoError(
            f"trainer's devices changed across the restart: {before} -> {await trainer_devices(demo)}"
        )
    await demo.until(
        "the plugins saw kubelet.sock come back, registered again, and capacity returned",
        lambda: demo.node_has(
            lambda d: _capacity(d, GPU) == 4 and _capacity(d, NIC) == 2 and d["allocatable"].get(GPU) == 4
        ),
    )
    await demo.show(pods=True)

    demo.say("Story 2: the NIC plugin dies")
    await demo.kill(demo.plugins[NIC])
    await demo.until(
        "its devices are unhealthy: allocatable 0, capacity kept",
        lambda: demo.node_has(lambda d: _capacity(d, NIC) == 2 and d["allocatable"].get(NIC) == 0),
    )
    await demo.show(node=True)
    await demo.until(
        "after the 2s stop grace period the resource left capacity",
        lambda: demo.node_has(lambda d: NIC not in d["capacity"]),
    )
    demo.say("The NIC plugin comes back")
    await start_plugin(demo, NIC)
    await demo.until(
        "it registered again: capacity and allocatable are back",
        lambda: demo.node_has(lambda d: _capacity(d, NIC) == 2 and d["allocatable"].get(NIC) == 2),
    )
    if await trainer_devices(demo) != before:
        raise DemoError("trainer's devices changed while its plugin was away")
    demo.console.print(
        "    ok: trainer kept its NIC all along (devices stay allocated across plugin restarts)",
        soft_wrap=True,
    )

    demo.say(
        "Story 3: the same node under --topology-manager-policy best-effort; wide is dropped in again, "
        "changed (a pod's UID hashes what it says: a comment alone would leave it Failed)"
    )
    await demo.restart_daemon("best-effort")
    await demo.until("trainer is Running again", lambda: demo.pod_is("trainer", "Running"))
    await demo.until(
        "the plugins registered again",
        lambda: demo.node_has(lambda d: d["allocatable"].get(GPU) == 4 and d["allocatable"].get(NIC) == 2),
    )
    again = _WIDE.replace("  namespace: demo\n", "  namespace: demo\n  labels: {attempt: '2'}\n")
    await asyncio.to_thread((demo.paths.manifests / "wide.yaml").write_text, again)
    await demo.until(
        "best-effort admits wide across both NUMA nodes (hint 0,1)",
        lambda: demo.pod_is(
            "wide", "Running", lambda p: (p["containers"][0]["topologyHint"] or {}).get("numaNodes") == [0, 1]
        ),
    )
    await demo.show(pods=True)
