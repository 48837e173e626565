"""Test helpers for the SDK's DRA face: an in-memory backend and the kubelet's side of the wire.

The backend implements the DRABackend protocol with a dict of claims and a list of what was published.
The kubelet side is plain grpc.aio over the real unix sockets: GetInfo and NotifyRegistrationStatus on
the registration socket, NodePrepareResources / NodeUnprepareResources / NodeWatchResources on dra.sock.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc

from kubedevice.api.dra.v1 import api_pb2 as v1
from kubedevice.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubedevice.api.dra.v1beta1 import api_pb2 as v1beta1
from kubedevice.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.plugin.dra.backend_api import ClaimFetchError, PublishedDevice, StatusEntries
from kubedevice.plugin.dra.device_model import CounterSet

DRIVER = "gpu.example.com"


class MemoryBackend:
    """Claims by namespace/name; every publish() recorded, with its counter sets; status writes applied to
    the claims as the API server applies an UpdateStatus (other drivers' entries kept)."""

    def __init__(self, node_name: str = "node-1") -> None:
        self.node_name = node_name
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.published: list[list[PublishedDevice]] = []
        self.counter_sets: list[list[CounterSet]] = []
        self.published_taints: dict[tuple[str, str, str, str], Any] = {}
        self.started = False
        self.fetches = 0

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        self.fetches += 1
        try:
            return copy.deepcopy(self.claims[(namespace, name)])
        except KeyError:
            raise ClaimFetchError(f'resourceclaims.resource.k8s.io "{name}" not found') from None

    async def publish(
        self, devices: Sequence[PublishedDevice], counter_sets: Sequence[CounterSet] = ()
    ) -> None:
        self.published.append(list(devices))
        self.counter_sets.append(list(counter_sets))

    async def update_claim_status(self, namespace: str, name: str, entries: StatusEntries) -> None:
        claim = await self.get_claim(namespace, name)
        status = claim.setdefault("status", {})
        others = [e for e in status.get("devices") or [] if e.get("driver") != DRIVER]
        status["devices"] = others + entries(claim)
        self.claims[(namespace, name)] = claim

    async def list_claims(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(c) for c in self.claims.values() if (c.get("status") or {}).get("allocation")]

    async def published_taint_times(self) -> dict[tuple[str, str, str, str], Any]:
        return dict(self.published_taints)

    async def allocated_devices(self) -> set[str]:
        """The optional AllocationSource: device names this driver's allocations name."""
        return {
            r["device"]
            for claim in self.claims.values()
            for r in ((claim.get("status") or {}).get("allocation") or {})
            .get("devices", {})
            .get("results", [])
            if r["driver"] == DRIVER
        }

    def add(self, claim: dict[str, Any]) -> None:
        meta = claim["metadata"]
        self.claims[(meta["namespace"], meta["name"])] = claim

    def published_ids(self) -> list[str] | None:
        return [d.id for d in self.published[-1]] if self.published else None


def make_claim(
    name: str,
    uid: str,
    results: Sequence[tuple[str, str] | tuple[str, str, str]],
    *,
    namespace: str = "default",
    pool: str = "node-1",
    config: Sequence[dict[str, Any]] = (),
    allocated: bool = True,
) -> dict[str, Any]:
    """A resource.k8s.io/v1 ResourceClaim; results are (request, device[, driver])."""
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = {
            "devices": {
                "results": [
                    {"request": r[0], "device": r[1], "driver": r[2] if len(r) > 2 else DRIVER, "pool": pool}
                    for r in results
                ],
                "config": list(config),
            }
        }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"devices": {"requests": [{"name": r[0].split("/")[0]} for r in results]}},
        "status": status,
    }


async def get_info(registration_socket: Path) -> reg.PluginInfo:
    async with grpc.aio.insecure_channel(f"unix://{registration_socket}") as channel:
        return await reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=5)


async def notify(registration_socket: Path, registered: bool = True, error: str = "") -> None:
    async with grpc.aio.insecure_channel(f"unix://{registration_socket}") as channel:
        await reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=registered, error=error), timeout=5
        )


async def register(registration_socket: Path) -> reg.PluginInfo:
    """What the kubelet's plugin watcher does with a new socket: GetInfo, then the verdict."""
    info = await get_info(registration_socket)
    await notify(registration_socket)
    return info


def _claims(pb: Any, claims: Sequence[tuple[str, str] | tuple[str, str, str]]) -> list[Any]:
    out = []
    for claim in claims:
        uid, name = claim[0], claim[1]
        namespace = claim[2] if len(claim) > 2 else "default"
        out.append(pb.Claim(uid=uid, name=name, namespace=namespace))
    return out


async def prepare(
    dra_socket: Path, claims: Sequence[tuple[str, str] | tuple[str, str, str]], version: str = "v1"
) -> dict[str, Any]:
    """NodePrepareResources; claims are (uid, name[, namespace]). Returns {uid: {devices, error}}."""
    pb, grpc_mod = (v1, v1_grpc) if version == "v1" else (v1beta1, v1beta1_grpc)
    async with grpc.aio.insecure_channel(f"unix://{dra_socket}") as channel:
        response = await grpc_mod.DRAPluginStub(channel).NodePrepareResources(
            pb.NodePrepareResourcesRequest(claims=_claims(pb, claims)), timeout=10
        )
    return {
        uid: {
            "error": answer.error,
            "devices": [
                {
                    "request_names": list(d.request_names),
                    "pool_name": d.pool_name,
                    "device_name": d.device_name,
                    "cdi_device_ids": list(d.cdi_device_ids),
                }
                for d in answer.devices
            ],
        }
        for uid, answer in response.claims.items()
    }


async def unprepare(
    dra_socket: Path, claims: Sequence[tuple[str, str] | tuple[str, str, str]], version: str = "v1"
) -> dict[str, str]:
    pb, grpc_mod = (v1, v1_grpc) if version == "v1" else (v1beta1, v1beta1_grpc)
    async with grpc.aio.insecure_channel(f"unix://{dra_socket}") as channel:
        response = await grpc_mod.DRAPluginStub(channel).NodeUnprepareResources(
            pb.NodeUnprepareResourcesRequest(claims=_claims(pb, claims)), timeout=10
        )
    return {uid: answer.error for uid, answer in response.claims.items()}


async def health_messages(dra_socket: Path, pb: Any, grpc_mod: Any) -> AsyncIterator[dict[str, str]]:
    """Each NodeWatchResourcesResponse as {device name: health name}."""
    async with grpc.aio.insecure_channel(f"unix://{dra_socket}") as channel:
        stream = grpc_mod.DRAResourceHealthStub(channel).NodeWatchResources(pb.NodeWatchResourcesRequest())
        async for message in stream:
            yield {d.device.device_name: pb.HealthStatus.Name(d.health) for d in message.devices}


async def next_matching(stream: AsyncIterator[dict[str, str]], expected: dict[str, str]) -> dict[str, str]:
    async with asyncio.timeout(20):
        async for message in stream:
            if message == expected:
                return message
    raise AssertionError(f"health stream ended before {expected}")
