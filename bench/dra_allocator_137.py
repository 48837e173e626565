"""The 1.37 profile of scenario "dra-allocator": partitionable devices and shared devices on 1,024 devices.

One node with two drivers: 96 MIG-shaped GPUs (each a counter set of 7 slices, a full-GPU device
consuming all 7 and seven 1-slice partitions: 768 devices) and 256 shared devices (allowMultipleAllocations,
80Gi of memory, a validRange policy in 1Gi steps). Each pod has one claim of two requests: a 1-slice
partition (a CEL selector on its profile) and a 10Gi share. Pods come one after another; once 336 claims
are live (half the partitions) the oldest is freed with each new pod, as on a busy node. The cost per claim
is measured at 200, 1,000 and 5,000 pods; it should not grow with the number of pods that came before.
"""

from __future__ import annotations

import statistics
import time
from collections import deque

from bench.pod_latency import percentile
from kubedevice.resource.capacity import (
    CapacityRange,
    CapacityRequestPolicy,
    CapacityRequirements,
    DeviceCapacity,
)
from kubedevice.resource.counters import Counter, CounterSet, DeviceCounterConsumption
from kubedevice.resource.model import (
    AllocationResult,
    DeviceClassDocument,
    DeviceRequest,
    ExactDeviceRequest,
    ObjectMeta,
    ResourceClaimSpec,
)
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.slice_model import AttributeValue, Pool, ResourceSliceDocument, SliceDevice
from kubedevice.scheduler.allocated import AllocatedState
from kubedevice.scheduler.allocator import AllocationRequest, ClaimToAllocate, allocate
from kubedevice.scheduler.cel import CelSelectors

NODE = "node-1"
MIG = "mig.bench.example.com"
SHARE = "share.bench.example.com"
SLICES_PER_GPU = 7
CLASSES = {
    "mig": DeviceClassDocument(meta=ObjectMeta(name="mig"), selectors=(f"device.driver == '{MIG}'",)),
    "share": DeviceClassDocument(meta=ObjectMeta(name="share"), selectors=(f"device.driver == '{SHARE}'",)),
}
ONE_SLICE = f"device.attributes['{MIG}'].profile == '1g'"
TEN_GI = CapacityRequirements({"memory": Quantity.parse("10Gi")})


def _slices(count: int) -> Counter:
    return Counter(str(count), count * 10**9)


def mig_pool(gpus: int) -> Pool:
    devices: list[SliceDevice] = []
    sets: dict[str, CounterSet] = {}
    for g in range(gpus):
        name = f"gpu-{g}"
        sets[name] = CounterSet(name, {"slices": _slices(SLICES_PER_GPU)})
        whole = (DeviceCounterConsumption(name, {"slices": _slices(SLICES_PER_GPU)}),)
        devices.append(
            SliceDevice(name, {"profile": AttributeValue("string", "7g")}, consumes_counters=whole)
        )
        part = (DeviceCounterConsumption(name, {"slices": _slices(1)}),)
        devices.extend(
            SliceDevice(
                f"{name}-mig-{k}", {"profile": AttributeValue("string", "1g")}, consumes_counters=part
            )
            for k in range(SLICES_PER_GPU)
        )
    document = ResourceSliceDocument(
        meta=ObjectMeta(name=f"{NODE}-mig"), driver=MIG, node_name=NODE, pool=NODE, devices=tuple(devices)
    )
    return Pool(driver=MIG, name=NODE, generation=0, slices=(document,), counter_sets=sets)


def share_pool(count: int) -> Pool:
    policy = CapacityRequestPolicy(
        default=Quantity.parse("1Gi"),
        valid_range=CapacityRange(min=Quantity.parse("1Gi"), step=Quantity.parse("1Gi")),
    )
    memory = {"memory": DeviceCapacity(Quantity.parse("80Gi"), policy)}
    devices = tuple(
        SliceDevice(f"share-{i}", {}, memory, allow_multiple_allocations=True) for i in range(count)
    )
    document = ResourceSliceDocument(
        meta=ObjectMeta(name=f"{NODE}-share"), driver=SHARE, node_name=NODE, pool=NODE, devices=devices
    )
    return Pool(driver=SHARE, name=NODE, generation=0, slices=(document,))


def claim(index: int) -> ClaimToAllocate:
    requests = (
        DeviceRequest(name="mig", exactly=ExactDeviceRequest("mig", (ONE_SLICE,))),
        DeviceRequest(name="share", exactly=ExactDeviceRequest("share", capacity=TEN_GI)),
    )
    return ClaimToAllocate("default", f"pod-{index}-claim", ResourceClaimSpec(requests=requests))


def one_run(cel: CelSelectors, pools: list[Pool], pods: int, live_claims: int) -> list[float]:
    """Seconds per claim, pods one after another; the oldest claim is freed once `live_claims` are held."""
    live: deque[AllocationResult] = deque()
    state = AllocatedState()
    costs = []
    for index in range(pods):
        request = AllocationRequest(
            claims=(claim(index),),
            classes=CLASSES,
            pools=pools,
            in_use=state.in_use,
            namespaces={},
            node_name=NODE,
            consumed_capacity=state.consumed_capacity,
        )
        started = time.perf_counter()
        (allocation,) = allocate(request, cel)
        costs.append(time.perf_counter() - started)
        live.append(allocation)
        if len(live) > live_claims:
            live.popleft()
        state = AllocatedState.gather(live)
    return costs


def measure(cel: CelSelectors, pools: list[Pool], pods: int, live_claims: int) -> dict[str, float]:
    """The cost per claim of one run: median and p99 over all pods."""
    costs = one_run(cel, pools, pods, live_claims)
    return {"median": statistics.median(costs), "p99": percentile(costs, 0.99)}
