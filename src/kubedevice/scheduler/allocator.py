"""The local allocator: the scheduler's structured allocation for the claims of one pod, on this node.

`allocate(AllocationRequest)` returns one AllocationResult per claim, in the request's order, or raises
Unschedulable with the message the pod's Pending status shows. All claims of the pod go into one search
and are allocated together or not at all. Candidates are taken in a fixed order: pools by (driver, pool
name) compared as bytes (pools with binding conditions last), slices by name, devices in `spec.devices`
order (docs/kubelet-map.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from kubedevice.resource.model import (
    AllocationResult,
    DeviceClassDocument,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    NamespaceDocument,
)
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.slice_model import Pool
from kubedevice.scheduler.candidate import Candidate
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.scheduler.config import build_config
from kubedevice.scheduler.constraints import Constraint, DistinctAttribute, MatchAttribute
from kubedevice.scheduler.counters import SharedCounters
from kubedevice.scheduler.explain import explain_failure, explain_requests
from kubedevice.scheduler.explanation import RequestExplanation
from kubedevice.scheduler.node_selection import allocation_nodes
from kubedevice.scheduler.request import (
    ADMIN_ACCESS_LABEL,
    AllocationRequest,
    ClaimToAllocate,
    Unschedulable,
)
from kubedevice.scheduler.search import MAX_RESULTS, RequestData, Search, SearchError
from kubedevice.scheduler.taints import TaintRules

__all__ = [
    "ADMIN_ACCESS_LABEL",
    "AllocationRequest",
    "ClaimToAllocate",
    "Unschedulable",
    "allocate",
    "check_admin_access",
]


def allocate(
    request: AllocationRequest,
    selectors: CelSelectors | None = None,
    share_ids: Callable[[], str] | None = None,
) -> list[AllocationResult]:
    """One allocation per claim, or Unschedulable. Pass the daemon's long-lived `selectors`: its cache
    is what keeps repeated searches cheap (a fresh one is made otherwise). `share_ids` makes the shareID
    of each share of a device with allowMultipleAllocations (a random UUID, as upstream's, by default)."""
    for claim in request.claims:
        _check_admitted(claim, request.namespaces)
    cel = selectors if selectors is not None else CelSelectors()
    usable = _usable(request.pools)
    # A shared device with shares allocated holds its counters, as a device in use does (`IsDeviceAllocated`).
    counters = SharedCounters(usable, request.in_use | request.consumed_capacity.keys())
    candidates = _candidates(request, usable, counters)
    search: Search | None = None
    try:
        search = _prepare(request, candidates, cel, counters)
        found = search.run()
    except SearchError as err:
        raise Unschedulable(err.message, _explanation(search, request)) from err
    except RecursionError as err:
        # One stack frame per wanted device: only a pod wanting several hundred devices gets here.
        raise Unschedulable(
            "cannot allocate all claims: the pod's claims want more devices than one search can take",
            _explanation(search, request),
        ) from err
    if not found:
        explanation = explain_requests(search, request.claims)
        invalid = [p for p in _ordered(request.pools) if p.invalid is not None]
        if invalid:
            # Upstream's answer when the search failed and some pool could not be used at all.
            pool = invalid[0]
            raise Unschedulable(
                f"invalid resource pools were encountered: {pool.driver}/{pool.name}: {pool.invalid}",
                explanation,
            )
        message = "cannot allocate all claims: " + explain_failure(search, request.claims)
        raise Unschedulable(message, explanation)
    new_share_id = share_ids or _random_share_id
    allocations: list[AllocationResult] = []
    for index, claim in enumerate(request.claims):
        taken = search.results[index]
        results = tuple(
            DeviceRequestAllocationResult(
                request=t.request,
                driver=t.id[0],
                pool=t.id[1],
                device=t.id[2],
                admin_access=True if t.admin_access else None,
                tolerations=t.tolerations,
                binding_conditions=t.candidate.device.binding_conditions,
                binding_failure_conditions=t.candidate.device.binding_failure_conditions,
                share_id=None if t.consumed is None else new_share_id(),
                consumed_capacity=t.consumed or None,
            )
            for t in taken
        )
        config = build_config(claim.spec, index, search)
        node_name, node_selector = allocation_nodes((t.candidate for t in taken), request.node_name)
        allocations.append(AllocationResult(results, config, node_name, node_selector))
    return allocations


def _explanation(search: Search | None, request: AllocationRequest) -> tuple[RequestExplanation, ...]:
    """The explanation of a search that ended in an error (none when it never started)."""
    return explain_requests(search, request.claims) if search is not None else ()


def _random_share_id() -> str:
    return str(uuid.uuid4())


def _check_admitted(claim: ClaimToAllocate, namespaces: Mapping[str, NamespaceDocument]) -> None:
    """What the API server would have refused."""
    check_admin_access(claim, namespaces)


def check_admin_access(claim: ClaimToAllocate, namespaces: Mapping[str, NamespaceDocument]) -> None:
    """The API server's check of `adminAccess` requests: the namespace must carry the label. Also run
    on a template's claim when it is generated."""
    namespace = namespaces.get(claim.namespace)
    allowed = namespace is not None and namespace.meta.labels.get(ADMIN_ACCESS_LABEL) == "true"
    for i, device_request in enumerate(claim.spec.requests):
        if device_request.exactly is not None and device_request.exactly.admin_access and not allowed:
            raise Unschedulable(
                f"ResourceClaim {claim.key}: spec.devices.requests[{i}].exactly.adminAccess: Forbidden: "
                f"admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` label "
                "on the containing namespace"
            )


def _candidates(request: AllocationRequest, pools: list[Pool], counters: SharedCounters) -> list[Candidate]:
    """Devices of the complete, valid pools in search order (pools with a device that has binding
    conditions last, as upstream's `GatherPools` orders them), each with what the search checks of it
    besides its selectors: whether it serves this node, its taints (DeviceTaintRules' included) and the
    shared counters it consumes; a device using a left-out feature never qualifies. One pass, and for a
    device without those features nothing but the candidate itself: this runs for every claim."""
    rules = TaintRules(request.taint_rules) if request.taint_rules else None
    first: list[Candidate] = []
    last: list[Candidate] = []
    for pool in pools:
        driver, name = pool.driver, pool.name
        overdrawn = counters.overdrawn(pool)
        binding = False
        out: list[Candidate] = []
        for device_slice in pool.slices:
            per_device = device_slice.per_device_node_selection
            for device in device_slice.devices:
                if device.binding_conditions:
                    binding = True
                if device.unsupported is not None or device_slice.unsupported is not None:
                    continue
                candidate = Candidate(
                    (driver, name, device.name), device, None, device_slice, True, device.taints
                )
                if per_device:
                    candidate.for_node = device.serves(request.node_name, request.node_labels)
                if rules is not None:
                    candidate.taints = rules.taints(driver, name, device)
                if device.consumes_counters:
                    candidate.counter_use = counters.use(pool, device)
                    candidate.counters_overdrawn = overdrawn
                out.append(candidate)
        (last if binding else first).extend(out)
    return first + last if last else first


def _usable(pools: Sequence[Pool]) -> list[Pool]:
    """The complete, valid pools by (driver, pool name) compared as bytes."""
    return [p for p in _ordered(pools) if p.complete and p.invalid is None]


def _ordered(pools: Sequence[Pool]) -> list[Pool]:
    return sorted(pools, key=lambda p: (p.driver.encode(), p.name.encode()))


def _prepare(
    request: AllocationRequest, candidates: list[Candidate], cel: CelSelectors, counters: SharedCounters
) -> Search:
    """Upstream's checks before the search: classes, `All` devices, the 32-results limit, constraints."""
    request_data: dict[tuple[int, int, int], RequestData] = {}
    constraints: list[list[Constraint]] = []
    search = Search(
        claims=[c.key for c in request.claims],
        request_counts=[len(c.spec.requests) for c in request.claims],
        request_data=request_data,
        constraints=constraints,
        candidates=candidates,
        in_use=frozenset(request.in_use),
        selectors=cel,
        consumed=request.consumed_capacity,
        counters=counters,
    )
    unusable = [p for p in _ordered(request.pools) if not p.complete or p.invalid is not None]
    for c, claim in enumerate(request.claims):
        minimum = 0
        for r, device_request in enumerate(claim.spec.requests):
            if device_request.first_available:
                fewest = None
                for s, sub in enumerate(device_request.first_available):
                    data = RequestData(
                        claim.key,
                        sub.name,
                        device_request.name,
                        _device_class(request, claim, sub.name, sub.device_class_name),
                        sub.selectors,
                        sub.allocation_mode == "All",
                        False,
                        sub.count,
                        capacity=_requests(sub),
                        tolerations=sub.tolerations,
                    )
                    request_data[(c, r, s)] = _with_devices(search, (c, r, s), data, unusable)
                    fewest = data.num_devices if fewest is None else min(fewest, data.num_devices)
                minimum += fewest or 0
            elif device_request.exactly is not None:
                exact = device_request.exactly
                data = RequestData(
                    claim.key,
                    device_request.name,
                    None,
                    _device_class(request, claim, device_request.name, exact.device_class_name),
                    exact.selectors,
                    exact.allocation_mode == "All",
                    exact.admin_access,
                    exact.count,
                    capacity=_requests(exact),
                    tolerations=exact.tolerations,
                )
                request_data[(c, r, 0)] = _with_devices(search, (c, r, 0), data, unusable)
                minimum += data.num_devices
            else:
                raise SearchError(
                    f"claim {claim.key}, request {device_request.name}: "
                    "missing device class name (unsupported request type?)"
                )
        if minimum > MAX_RESULTS:
            raise SearchError(
                f"claim {claim.key}: number of requested devices {minimum} "
                f"exceeds the claim limit of {MAX_RESULTS}"
            )
        claim_constraints: list[Constraint] = []
        for i, constraint in enumerate(claim.spec.constraints):
            if constraint.match_attribute is not None:
                claim_constraints.append(MatchAttribute(constraint, constraint.match_attribute))
            elif constraint.distinct_attribute is not None:
                claim_constraints.append(DistinctAttribute(constraint, constraint.distinct_attribute))
            else:
                raise SearchError(
                    f"claim {claim.key}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
        constraints.append(claim_constraints)
    return search


def _device_class(
    request: AllocationRequest, claim: ClaimToAllocate, name: str, class_name: str
) -> DeviceClassDocument:
    found = request.classes.get(class_name)
    if found is None:
        raise SearchError(
            f"claim {claim.key}, request {name}: could not retrieve device class {class_name}: "
            f'deviceclass.resource.k8s.io "{class_name}" not found'
        )
    return found


def _with_devices(
    search: Search, key: tuple[int, int, int], data: RequestData, unusable: list[Pool]
) -> RequestData:
    """`All` mode: every matching device, found (selectors run) before the search starts."""
    if not data.all_mode:
        return data
    if unusable:
        pool = unusable[0]
        state = "being updated" if not pool.complete else "invalid"
        raise SearchError(
            f"claim {data.claim}, request {data.name}: asks for all devices, but resource pool "
            f"{pool.driver}/{pool.name} is currently {state}"
        )
    data.all_devices = [
        c for c in search.candidates if search.is_selectable(key, data, c) and search.capacity_fits(data, c)
    ]
    data.num_devices = len(data.all_devices)
    return data


def _requests(shape: ExactDeviceRequest | DeviceSubRequest) -> Mapping[str, Quantity] | None:
    return None if shape.capacity is None else shape.capacity.requests
