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

Beside them, in the same run, the same N pods sharing SHARED_DEVICES devices by consumable capacity: the
fake driver publishes them with `--shared` (`allowMultipleAllocations`, memory 80Gi and compute 100 each,
as the dra-example-driver's), and each manifest holds a claim with no allocation asking 1Gi of memory and
1 unit of compute of class `gpu` and the pod using it: the daemon allocates each share (the allocator's
consumable capacity), prepares it and runs the pod. The ratio is to the one-claim-per-device figure of
the same run, whose claims come allocated: it also holds the cost of allocating.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

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
"""
#: The pod of each manifest, using its claim.
POD = """---
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


#: The shared devices: 16 of 100 compute units each hold 1,000 one-unit shares.
SHARED_DEVICES = 16
SHARED_MANIFEST = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: bench-{i:06d}
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu, capacity: {{requests: {{memory: 1Gi, compute: "1"}}}}}}
"""
DEVICE_CLASS = f"""apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu}}
spec:
  selectors:
  - cel: {{expression: "device.driver == '{DRIVER}'"}}
"""


def manifest_text(i: int, device: str) -> str:
    pool, _, name = device.partition("/")
    return MANIFEST.format(i=i, driver=DRIVER, pool=pool, device=name) + POD.format(i=i)


def write_manifests(folder: Path, devices: list[str]) -> None:
    for i, device in enumerate(devices):
        write_manifest(folder, i, manifest_text(i, device))


def write_shared_manifests(folder: Path, pods: int) -> None:
    for i in range(pods):
        write_manifest(folder, i, SHARED_MANIFEST.format(i=i) + POD.format(i=i))


async def measure(pods: int, *, shared: bool = False) -> float:
    """Seconds from the first manifest written to the last pod logged Running: one allocated claim per
    device of `pods` devices, or (`shared`) `pods` claims for shares of SHARED_DEVICES devices."""
    devices = SHARED_DEVICES if shared else pods
    with short_tempdir() as root:
        procs = Processes(root)
        try:
            await procs.spawn("daemon", "node", "--root-dir", str(root), "--node-name", NODE)
            await daemon_admission._wait_socket(procs)
            await procs.spawn(
                "dra-plugin",
                *("plugin", "fake", "--driver", DRIVER, "--api", "dra", "--devices", str(devices)),
                *("--kubelet-dir", str(root), "--cdi-spec-dir", str(root / "cdi"), "--log-level", "warning"),
                *(("--shared",) if shared else ()),
            )
            node = await procs.wait_status(
                "/node",
                lambda v: len(v.get("draDrivers", {}).get(DRIVER, {}).get("devices", [])) == devices,
                f"{devices} devices of {DRIVER} in /node",
            )
            if shared:
                procs.paths.manifests.mkdir(parents=True, exist_ok=True)
                (procs.paths.manifests / "class.yaml").write_text(DEVICE_CLASS)
            log = RunningLog(root / "daemon.log")
            try:
                start = time.perf_counter()
                if shared:
                    await asyncio.to_thread(write_shared_manifests, procs.paths.manifests, pods)
                else:
                    names = list(node["draDrivers"][DRIVER]["devices"])
                    await asyncio.to_thread(write_manifests, procs.paths.manifests, names)
                end = await log.wait_for(pods, procs)
            finally:
                log.close()
            await check_all_running(procs, pods)
            claims = (await procs.status("/claims"))["claims"]
            prepared = sum(1 for c in claims if c["prepared"])
            if prepared != pods:
                raise RuntimeError(f"{pods} pods Running but /claims lists {prepared} claims prepared")
            if shared:
                check_shares(claims, pods)
            return end - start
        finally:
            await procs.close()


def check_shares(claims: list[dict[str, Any]], pods: int) -> None:
    """Every claim a share of its own of one of the shared devices, 1Gi and 1 unit of compute."""
    results = [r for c in claims for r in (c.get("allocation") or {}).get("devices", {}).get("results", [])]
    shares = {(r["device"], r.get("shareID")) for r in results}
    if len(results) != pods or len(shares) != pods or any(share is None for _, share in shares):
        raise RuntimeError(f"{pods} shared claims prepared but {len(shares)} distinct shares allocated")
    if any(r.get("consumedCapacity") != {"memory": "1Gi", "compute": "1"} for r in results):
        raise RuntimeError("a shared claim consumed other than 1Gi of memory and 1 unit of compute")


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    pods = 20 if quick else 1_000
    for _ in range(runs):
        plugin_elapsed = await daemon_admission.measure(pods)
        dra_elapsed = await measure(pods)
        shared_elapsed = await measure(pods, shared=True)
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
        shared = f"{pods:,} pods sharing {SHARED_DEVICES} devices by capacity"
        figures.add(f"{shared} to Running", shared_elapsed, "s")
        figures.add(f"{shared}: rate", pods / shared_elapsed, "pods/s")
        figures.add(f"{shared}: per pod", shared_elapsed / pods * 1e3, "ms")
        figures.add(f"{shared}: rate / one-claim-per-device rate", dra_elapsed / shared_elapsed, "x")
    return figures
