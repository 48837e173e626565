"""Small builders for the allocator's table tests: slices, pools, classes and claims in the v1 shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubedevice.resource.capacity import ConsumedCapacity, DeviceCapacity
from kubedevice.resource.counters import CounterSet
from kubedevice.resource.model import (
    AllocationResult,
    DeviceClaimConfiguration,
    DeviceClassDocument,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    DeviceSubRequest,
    ExactDeviceRequest,
    NamespaceDocument,
    ObjectMeta,
    OpaqueConfig,
    ResourceClaimSpec,
)
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.slice_model import AttributeValue, Pool, ResourceSliceDocument, SliceDevice
from kubedevice.scheduler.allocator import AllocationRequest, ClaimToAllocate

GPU = "gpu.example.com"
NODE = "node-1"


def attr(value: int | bool | str, kind: str | None = None) -> AttributeValue:
    if kind is None:
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
    return AttributeValue(kind, value)  # type: ignore[arg-type]


def dev(
    name: str,
    attributes: Mapping[str, AttributeValue] | None = None,
    capacity: Mapping[str, str | DeviceCapacity] | None = None,
    unsupported: str | None = None,
    shared: bool = False,
    **extra: Any,
) -> SliceDevice:
    """A device; a capacity given as text has no requestPolicy; `shared`: allowMultipleAllocations;
    `extra` sets the newer fields (taints, consumes_counters, binding_conditions, ...)."""
    capacities = {
        k: v if isinstance(v, DeviceCapacity) else DeviceCapacity(Quantity.parse(v))
        for k, v in (capacity or {}).items()
    }
    return SliceDevice(
        name, dict(attributes or {}), capacities, unsupported, allow_multiple_allocations=shared, **extra
    )


def pool(
    *devices: SliceDevice | str,
    driver: str = GPU,
    name: str = NODE,
    complete: bool = True,
    slices: int = 1,
    invalid: str | None = None,
    counter_sets: Mapping[str, CounterSet] | None = None,
) -> Pool:
    """A pool; its devices are dealt round-robin-free into `slices` slices, in order; `counter_sets`
    as `gather_pools` would have checked them."""
    items = [dev(d) if isinstance(d, str) else d for d in devices]
    per = max(1, -(-len(items) // slices))
    docs = tuple(
        ResourceSliceDocument(
            meta=ObjectMeta(name=f"{NODE}-{driver}-{i}"),
            driver=driver,
            node_name=NODE,
            pool=name,
            slice_count=slices,
            devices=tuple(items[i * per : (i + 1) * per]),
        )
        for i in range(slices)
    )
    return Pool(
        driver=driver,
        name=name,
        generation=0,
        slices=docs,
        complete=complete,
        invalid=invalid,
        counter_sets=dict(counter_sets or {}),
    )


def device_class(
    name: str = "gpu",
    driver: str = GPU,
    config: tuple[Any, ...] = (),
    selectors: tuple[str, ...] | None = None,
) -> DeviceClassDocument:
    return DeviceClassDocument(
        meta=ObjectMeta(name=name),
        selectors=selectors if selectors is not None else (f'device.driver == "{driver}"',),
        config=tuple(DeviceClaimConfiguration(opaque=OpaqueConfig(driver, p)) for p in config),
    )


def req(
    name: str,
    cls: str = "gpu",
    count: int = 1,
    selectors: tuple[str, ...] = (),
    mode: str = "ExactCount",
    admin: bool = False,
    **extra: Any,
) -> DeviceRequest:
    exact = ExactDeviceRequest(cls, selectors, mode, count, admin, **extra)  # type: ignore[arg-type]
    return DeviceRequest(name=name, exactly=exact)


def sub(
    name: str,
    cls: str = "gpu",
    count: int = 1,
    selectors: tuple[str, ...] = (),
    mode: str = "ExactCount",
    **extra: Any,
) -> Any:
    return DeviceSubRequest(name, cls, selectors, mode, count, **extra)  # type: ignore[arg-type]


def first(name: str, *subs: DeviceSubRequest) -> DeviceRequest:
    return DeviceRequest(name=name, first_available=subs)


def claim(
    name: str,
    *requests: DeviceRequest,
    constraints: tuple[DeviceConstraint, ...] = (),
    config: tuple[DeviceClaimConfiguration, ...] = (),
    namespace: str = "default",
) -> ClaimToAllocate:
    spec = ResourceClaimSpec(requests=requests, constraints=constraints, config=config)
    return ClaimToAllocate(namespace, name, spec)


def match(attribute: str, *requests: str) -> DeviceConstraint:
    return DeviceConstraint(requests=requests, match_attribute=attribute)


def claim_config(parameters: Any, *requests: str, driver: str = GPU) -> DeviceClaimConfiguration:
    return DeviceClaimConfiguration(requests=requests, opaque=OpaqueConfig(driver, parameters))


def namespace(name: str, **labels: str) -> NamespaceDocument:
    return NamespaceDocument(ObjectMeta(name=name, labels=dict(labels)))


def request(
    claims: list[ClaimToAllocate],
    pools: list[Pool],
    classes: list[DeviceClassDocument] | None = None,
    in_use: set[DeviceID] | None = None,
    namespaces: list[NamespaceDocument] | None = None,
    consumed: Mapping[DeviceID, ConsumedCapacity] | None = None,
    **extra: Any,
) -> AllocationRequest:
    """`extra`: node_name, node_labels, taint_rules."""
    return AllocationRequest(
        claims=tuple(claims),
        classes={c.meta.name: c for c in (classes if classes is not None else [device_class()])},
        pools=pools,
        in_use=frozenset(in_use or ()),
        namespaces={n.meta.name: n for n in namespaces or ()},
        node_name=extra.pop("node_name", NODE),
        consumed_capacity=dict(consumed or {}),
        **extra,
    )


def picked(allocations: list[AllocationResult]) -> list[list[tuple[str, str]]]:
    """Per claim, (request, device) in the order taken."""
    return [[(r.request, r.device) for r in a.results] for a in allocations]
