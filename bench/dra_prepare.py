"""Scenario "dra-prepare": pods with one single-device claim each, prepared through a raw DRA plugin.

The DRA manager's PrepareResources as the kubelet calls it before a sandbox: validation, the cache pass
with its checkpoint write, one NodePrepareResources, the commit and its checkpoint write (both durable).
Pods are prepared one after another and with 32 in flight (group commit shares fsyncs only then); the
per-pod cost is shown per window so any growth with the pod count is visible, beside a device-plugin
admission of the same pods in the same run (the target: DRA within 1.5x of it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import grpc.aio

from bench.admission import admit_all, one_device_pods, window_cost
from bench.common import Figures, Scale, Target, admitting_node, short_tempdir
from kubedevice.api.dra.v1 import api_pb2 as dra
from kubedevice.api.dra.v1 import api_pb2_grpc as dra_grpc
from kubedevice.dra import DRAManager
from kubedevice.dra.types import (
    AllocationResult,
    ConsumerReference,
    ContainerClaim,
    DeviceRequestAllocationResult,
    DRAContainer,
    DRAPod,
    PodClaim,
    ResourceClaim,
)

NAME = "dra-prepare"
DRIVER = "bench.kubedevice.io"


class _Plugin(dra_grpc.DRAPluginServicer):
    """Prepares every claim with one device named after the claim: as little work as a driver can do."""

    async def NodePrepareResources(
        self, request: dra.NodePrepareResourcesRequest, context: grpc.aio.ServicerContext
    ) -> dra.NodePrepareResourcesResponse:
        response = dra.NodePrepareResourcesResponse()
        for claim in request.claims:
            response.claims[claim.uid].devices.add(
                request_names=["r"],
                pool_name="node",
                device_name=claim.name,
                cdi_device_ids=[f"{DRIVER}/dev={claim.name}"],
            )
        return response

    async def NodeUnprepareResources(
        self, request: dra.NodeUnprepareResourcesRequest, context: grpc.aio.ServicerContext
    ) -> dra.NodeUnprepareResourcesResponse:
        response = dra.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            response.claims[claim.uid].error = ""
        return response


class _Claims:
    def __init__(self, pods: Sequence[DRAPod]) -> None:
        self._claims = {
            pod.resource_claims[0].resource_claim_name: ResourceClaim(
                pod.namespace,
                pod.resource_claims[0].resource_claim_name or "",
                f"uid-{pod.uid}",
                allocation=AllocationResult((DeviceRequestAllocationResult("r", DRIVER, "node", pod.name),)),
                reserved_for=(ConsumerReference("pods", pod.name, pod.uid),),
            )
            for pod in pods
        }

    async def get_claim(self, namespace: str, name: str) -> ResourceClaim:
        return self._claims[name]


def claim_pods(count: int) -> list[DRAPod]:
    return [
        DRAPod(
            f"pod-{i:06d}",
            "default",
            f"bench-{i}",
            resource_claims=(PodClaim("gpu", resource_claim_name=f"claim-{i}"),),
            containers=(DRAContainer("main", (ContainerClaim("gpu"),)),),
        )
        for i in range(count)
    ]


async def prepare_all(
    root: Path, pods: Sequence[DRAPod], inflight: int
) -> tuple[list[float], tuple[int, float]]:
    """Prepare every pod's claim; returns the completion times (s from start) and the checkpoint writes
    with the seconds they took."""
    server = grpc.aio.server()
    dra_grpc.add_DRAPluginServicer_to_server(_Plugin(), server)
    socket = root / "dra.sock"
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    manager = DRAManager(root, claims=_Claims(pods))
    await manager.start()
    try:
        manager.plugin_handler.validate_plugin(DRIVER, str(socket), ["v1.DRAPlugin"])
        await manager.plugin_handler.register_plugin(DRIVER, str(socket), ["v1.DRAPlugin"])
        done: list[float] = []
        queue = iter(pods)
        start = time.perf_counter()

        async def worker() -> None:
            for pod in queue:
                await manager.prepare_resources(pod)
                done.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(inflight)))
        return done, manager.checkpoint_writes
    finally:
        await manager.stop()
        await server.stop(None)


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    quick = scale is Scale.QUICK
    pods = 30 if quick else 1_000
    windows = ((0, 10), (10, 30)) if quick else ((0, 100), (100, 300), (300, 1_000))
    for inflight in (1, 32):
        mode = "sequential" if inflight == 1 else f"{inflight} in flight"
        for _ in range(runs):
            with short_tempdir() as root:
                async with admitting_node(root / "dp", pods) as (tm, device_manager):
                    allocated = await admit_all(tm, device_manager, one_device_pods(pods), inflight)
            with short_tempdir() as root:
                prepared, (writes, write_s) = await prepare_all(root, claim_pods(pods), inflight)
            dp_cost = allocated[-1] / pods
            dra_cost = prepared[-1] / pods
            figures.add(f"{pods:,} pods, {mode}: prepares", pods / prepared[-1], "pods/s")
            figures.add(
                f"{pods:,} pods, {mode}: checkpoint writes per prepare",
                writes / pods,
                "writes",
                note="two per pod before group commit: the cache pass and the commit",
            )
            figures.add(
                f"{pods:,} pods, {mode}: checkpoint write time per prepare", write_s / pods * 1e3, "ms"
            )
            figures.add(f"{pods:,} pods, {mode}: device-plugin admission, per pod", dp_cost * 1e3, "ms")
            figures.add(
                f"{pods:,} pods, {mode}: DRA prepare / device-plugin admission",
                dra_cost / dp_cost,
                "x",
                target=Target(1.5) if not quick else None,
            )
            for lo, hi in windows:
                figures.add(
                    f"{pods:,} pods, {mode}: prepare per pod {lo + 1}-{hi}",
                    window_cost(prepared, lo, hi) * 1e3,
                    "ms",
                )
    return figures
