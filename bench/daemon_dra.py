"""Scenario "daemon-dra": N pods with one pre-allocated single-device ResourceClaim each through the node
daemon, from manifests to Running, beside N device-plugin pods through the same daemon in the same run.

The daemon (`kubedevice node`) and the SDK's fake DRA driver (`kubedevice plugin fake --api dra`) run as
real processes under one temporary root; the driver publishes N devices. Once they are in `/node`, N
manifest files are written at once, each holding a claim whose `status.allocation` names one device (as
a user or a scheduler wrote it) and the pod that uses it. The clock runs until the daemon has logged every
pod Running (its log followed with inotify, as in scenario "daemon"); `/pods` then must list them all
Running and `/claims` every claim prepared. Each pod costs the daemon its DRA step (reservation in
`dra_claims.json`), one NodePrepareResources (the driver writes a CDI spec per claim), the DRA checkpoint
and the state file; the device-plugin figure is scenario "daemon"'s, measured right before.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench import daemon_admission
from bench.common import Figures, Scale, Target, short_tempdir
from bench.daemon_admission import Processes, RunningLog, check_all_running, write_manifest

NAME = "daemon-dra"
DRIVER = "gpu.example.com"
NODE = "bench-node"
#: Issue 25: pods with a claim each reach Running at >= 60% of the device-plugin rate of the same run.
RATIO_TARGET = Target(0.6, "higher")

MANIFEST = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: bench-{i:06d}
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu}}
status:
  allocation:
    devices:
      results:
      - {{request: gpu, driver: {driver}, pool: {pool}, device: {device}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: bench-{i:06d}
  namespace: default
spec:
  resourceClaims:
  - {{name: gpu, resourceClaimName: bench-{i:06d}}}
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - {{name: gpu}}
"""


def manifest_text(i: int, device: str) -> str:
    pool, _, name = device.partition("/")
    return MANIFEST.format(i=i, driver=DRIVER, pool=pool, device=name)


def write_manifests(folder: Path, devices: list[str]) -> None:
    for i, device in enumerate(devices):
        write_manifest(folder, i, manifest_text(i, device))


async def measure(pods: int) -> float:
    """Seconds from the first manifest written to the last pod logged Running."""
    with short_tempdir() as root:
        procs = Processes(root)
        try:
            await procs.spawn("daemon", "node", "--root-dir", str(root), "--node-name", NODE)
            await daemon_admission._wait_socket(procs)
            await procs.spawn(
                "dra-plugin",
                *("plugin", "fake", "--driver", DRIVER, "--api", "dra", "--devices", str(pods)),
                *("--kubelet-dir", str(root), "--cdi-spec-dir", str(root / "cdi"), "--log-level", "warning"),
            )
            node = await procs.wait_status(
                "/node",
                lambda v: len(v.get("draDrivers", {}).get(DRIVER, {}).get("devices", [])) == pods,
                f"{pods} devices of {DRIVER} in /node",
            )
            devices = list(node["draDrivers"][DRIVER]["devices"])
            log = RunningLog(root / "daemon.log")
            try:
                start = time.perf_counter()
                await asyncio.to_thread(write_manifests, procs.paths.manifests, devices)
                end = await log.wait_for(pods, procs)
            finally:
                log.close()
            await check_all_running(procs, pods)
            claims = (await procs.status("/claims"))["claims"]
            prepared = sum(1 for c in claims if c["prepared"])
            if prepared != pods:
                raise RuntimeError(f"{pods} pods Running but /claims lists {prepared} claims prepared")
            return end - start
        finally:
            await procs.close()


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    pods = 20 if quick else 1_000
    for _ in range(runs):
        plugin_elapsed = await daemon_admission.measure(pods)
        dra_elapsed = await measure(pods)
        figures.add(f"{pods:,} claim pods to Running", dra_elapsed, "s")
        figures.add(f"{pods:,} claim pods: rate", pods / dra_elapsed, "pods/s")
        figures.add(f"{pods:,} claim pods: per pod", dra_elapsed / pods * 1e3, "ms")
        figures.add(f"{pods:,} device-plugin pods: rate", pods / plugin_elapsed, "pods/s")
        figures.add(
            f"{pods:,} pods: claim rate / device-plugin rate",
            plugin_elapsed / dra_elapsed,
            "x",
            target=None if quick else RATIO_TARGET,
        )
    return figures
