"""The PodResources v1 service over the device manager's and the DRA manager's state, with its metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import grpc
import grpc.aio
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.dra import DynamicResource
from kubedevice.manager import DeviceManager
from kubedevice.manager.types import Pod
from kubedevice.ratelimit import TokenBucket

API_VERSION = "v1"
RATE_LIMIT_MESSAGE = "rejected by rate limit"

#: (pod, active) for every pod the node knows, in a stable order.
PodLister = Callable[[], Sequence[tuple[Pod, bool]]]
#: (pod, container name) -> the container's `dynamic_resources` (the DRA manager's claim infos).
DynamicResourcesLookup = Callable[[Pod, str], Sequence[DynamicResource]]

_COUNTERS = {
    "kubelet_pod_resources_endpoint_requests_total": "Cumulative number of requests to the PodResource "
    "endpoint. Broken down by server api version.",
    "kubelet_pod_resources_endpoint_requests_list": "Number of requests to the PodResource List endpoint. "
    "Broken down by server api version.",
    "kubelet_pod_resources_endpoint_requests_get_allocatable": "Number of requests to the PodResource "
    "GetAllocatableResources endpoint. Broken down by server api version.",
    "kubelet_pod_resources_endpoint_requests_get": "Number of requests to the PodResource Get endpoint. "
    "Broken down by server api version.",
    "kubelet_pod_resources_endpoint_errors_list": "Number of requests to the PodResource List endpoint which "
    "returned error. Broken down by server api version.",
    "kubelet_pod_resources_endpoint_errors_get_allocatable": "Number of requests to the PodResource "
    "GetAllocatableResources endpoint which returned error. Broken down by server api version.",
    "kubelet_pod_resources_endpoint_errors_get": "Number of requests to the PodResource Get endpoint which "
    "returned error. Broken down by server api version.",
}


class PodResourcesMetrics:
    """The kubelet's PodResources counters, under their exact kubelet names.

    prometheus_client would add `_total` to a Counter's name; these names have none, so they are
    exposed as untyped samples with the kubelet's names rather than renamed.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._counts: dict[str, float] = dict.fromkeys(_COUNTERS, 0.0)
        registry.register(self)

    def inc(self, name: str) -> None:
        self._counts[name] += 1

    def value(self, name: str) -> float:
        return self._counts[name]

    def collect(self) -> Iterator[Metric]:
        for name, help_text in _COUNTERS.items():
            metric = Metric(name, help_text, "unknown")
            metric.add_sample(name, {"server_api_version": API_VERSION}, self._counts[name])
            yield metric


@dataclass(frozen=True, slots=True)
class _Rpc:
    requests: str
    errors: str


_LIST = _Rpc("kubelet_pod_resources_endpoint_requests_list", "kubelet_pod_resources_endpoint_errors_list")
_ALLOCATABLE = _Rpc(
    "kubelet_pod_resources_endpoint_requests_get_allocatable",
    "kubelet_pod_resources_endpoint_errors_get_allocatable",
)
_GET = _Rpc("kubelet_pod_resources_endpoint_requests_get", "kubelet_pod_resources_endpoint_errors_get")


def dynamic_resources(resources: Sequence[DynamicResource]) -> list[pr.DynamicResource]:
    """The DRA manager's entries as messages, its order and CDI lists (the kubelet's quirk) kept."""
    return [
        pr.DynamicResource(
            claim_name=r.claim_name,
            claim_namespace=r.claim_namespace,
            claim_resources=[
                pr.ClaimResource(
                    cdi_devices=[pr.CDIDevice(name=cdi) for cdi in c.cdi_devices],
                    driver_name=c.driver_name,
                    pool_name=c.pool_name,
                    device_name=c.device_name,
                    share_id=c.share_id,
                )
                for c in r.claim_resources
            ],
        )
        for r in resources
    ]


def container_devices(devices: dict[str, dict[str, tuple[int, ...]]] | None) -> list[pr.ContainerDevices]:
    """One entry per device per NUMA node; a device without topology gives one entry without topology."""
    out: list[pr.ContainerDevices] = []
    for resource, per_device in sorted((devices or {}).items()):
        for device_id, nodes in sorted(per_device.items()):
            if not nodes:
                out.append(pr.ContainerDevices(resource_name=resource, device_ids=[device_id]))
                continue
            for node in nodes:
                out.append(
                    pr.ContainerDevices(
                        resource_name=resource,
                        device_ids=[device_id],
                        topology=pr.TopologyInfo(nodes=[pr.NUMANode(ID=node)]),
                    )
                )
    return out


class PodResourcesServicer(pr_grpc.PodResourcesListerServicer):
    def __init__(
        self,
        manager: DeviceManager,
        pods: PodLister,
        metrics: PodResourcesMetrics,
        limiter: TokenBucket | None = None,
        claims: DynamicResourcesLookup | None = None,
    ) -> None:
        self._manager = manager
        self._pods = pods
        self._claims = claims
        self._metrics = metrics
        self._limiter = limiter if limiter is not None else TokenBucket()

    async def _admit(self, rpc: _Rpc, context: grpc.aio.ServicerContext[object, object]) -> None:
        # The kubelet's rate limit is an interceptor: a rejected call is not counted by the handlers.
        if not self._limiter.allow():
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMIT_MESSAGE)
        self._metrics.inc("kubelet_pod_resources_endpoint_requests_total")
        self._metrics.inc(rpc.requests)

    def _pod_resources(self, pod: Pod) -> pr.PodResources:
        containers = [c for c in pod.init_containers if c.restart_policy == "Always"] + list(pod.containers)
        return pr.PodResources(
            name=pod.name,
            namespace=pod.namespace,
            containers=[
                pr.ContainerResources(
                    name=c.name,
                    devices=container_devices(self._manager.get_devices(pod.uid, c.name)),
                    dynamic_resources=dynamic_resources(self._claims(pod, c.name)) if self._claims else (),
                )
                for c in containers
            ],
        )

    async def List(
        self, request: pr.ListPodResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pr.ListPodResourcesResponse:
        await self._admit(_LIST, context)
        active = [pod for pod, is_active in self._pods() if is_active]
        self._manager.update_allocated_devices([p.uid for p in active])
        return pr.ListPodResourcesResponse(pod_resources=[self._pod_resources(p) for p in active])

    async def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pr.AllocatableResourcesResponse:
        await self._admit(_ALLOCATABLE, context)
        return pr.AllocatableResourcesResponse(
            devices=container_devices(self._manager.get_allocatable_devices())
        )

    async def Get(
        self, request: pr.GetPodResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pr.GetPodResourcesResponse:
        await self._admit(_GET, context)
        for pod, _active in self._pods():
            if pod.name == request.pod_name and pod.namespace == request.pod_namespace:
                return pr.GetPodResourcesResponse(pod_resources=self._pod_resources(pod))
        self._metrics.inc(_GET.errors)
        await context.abort(
            grpc.StatusCode.NOT_FOUND,
            f"pod {_shown(request.pod_name)} in namespace {_shown(request.pod_namespace)} not found",
        )
        raise AssertionError("unreachable: abort raises")


#: Longer names are cut in error messages: gRPC drops a status whose message passes its 8 KiB metadata
#: limit, and the caller would see "Stream removed" instead of NOT_FOUND.
_MAX_SHOWN = 256


def _shown(name: str) -> str:
    if len(name) <= _MAX_SHOWN:
        return name
    return f"{name[:_MAX_SHOWN]}... ({len(name)} characters)"
