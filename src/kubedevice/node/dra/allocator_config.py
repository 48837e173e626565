"""What the allocator writes besides the devices (the claim's config) and says when it finds nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubedevice.node.dra.allocator_search import Candidate, RequestData, Search, SearchError
from kubedevice.node.dra.model import DeviceAllocationConfiguration, OpaqueConfig, ResourceClaimSpec

if TYPE_CHECKING:
    from kubedevice.node.dra.allocator import ClaimToAllocate

_NO_COMBINATION = "no combination of free devices satisfies every request and constraint"


def _chosen(search: Search, c: int, r: int) -> RequestData:
    """The request's data, or for a `firstAvailable` request the subrequest the search kept."""
    data = search.request_data[(c, r, 0)]
    if data.parent is not None:
        data = search.request_data[(c, r, search.selected_sub[(c, r)])]
    return data


def build_config(
    spec: ResourceClaimSpec, c: int, search: Search
) -> tuple[DeviceAllocationConfiguration, ...]:
    """`status.allocation.devices.config` as upstream builds it.

    First each used class's `spec.config` (once per class, naming the requests that use it), then the
    claim's own entries that apply to an allocated request or chosen subrequest; last, an entry naming
    every request of the claim gets its `requests` cleared (empty means all).
    """
    entries: list[tuple[str, list[str], OpaqueConfig | None]] = []
    class_entries: dict[str, range] = {}
    for r in range(len(spec.requests)):
        data = _chosen(search, c, r)
        name = data.device_class.meta.name
        if name in class_entries:
            for i in class_entries[name]:
                entries[i][1].append(data.result_name)
            continue
        start = len(entries)
        for class_config in data.device_class.config:
            entries.append(("FromClass", [data.result_name], class_config.opaque))
        class_entries[name] = range(start, len(entries))
    chosen_names = [_chosen(search, c, r).result_name for r in range(len(spec.requests))]
    for claim_config in spec.config:
        applies = not claim_config.requests or any(
            request.name in claim_config.requests
            or (request.first_available and chosen in claim_config.requests)
            for request, chosen in zip(spec.requests, chosen_names, strict=True)
        )
        if applies:
            entries.append(("FromClaim", list(claim_config.requests), claim_config.opaque))
    configs: list[DeviceAllocationConfiguration] = []
    for source, requests, opaque in entries:
        covers_all = bool(requests) and all(
            request.name in requests or chosen in requests
            for request, chosen in zip(spec.requests, chosen_names, strict=True)
        )
        configs.append(
            DeviceAllocationConfiguration(
                source="FromClass" if source == "FromClass" else "FromClaim",
                requests=() if covers_all else tuple(requests),
                opaque=opaque,
            )
        )
    return tuple(configs)


def explain_failure(search: Search, claims: Sequence[ClaimToAllocate]) -> str:
    """The first request, in search order, that cannot be met even alone; else the combination text.

    A `firstAvailable` request is tested by its first subrequest. "Free" counts the matching devices
    not in use before the search (any matching device, for a request with admin access).
    """
    for c, claim in enumerate(claims):
        for r, request in enumerate(claim.spec.requests):
            data = search.request_data[(c, r, 0)]
            if data.all_mode:
                wanted = len(data.all_devices)
                free = sum(1 for d in data.all_devices if data.admin_access or d.id not in search.in_use)
                if wanted == 0 or free < wanted:
                    return (
                        f'ResourceClaim {claim.key}, request "{request.name}": '
                        f"all {wanted} matching device(s) wanted, {free} free"
                    )
                continue
            free = sum(
                1
                for candidate in search.candidates
                if (data.admin_access or candidate.id not in search.in_use)
                and _matches(search, (c, r, 0), data, candidate)
            )
            if free < data.num_devices:
                return (
                    f'ResourceClaim {claim.key}, request "{request.name}": '
                    f"{data.num_devices} matching device(s) wanted, {free} free"
                )
    return _NO_COMBINATION


def _matches(search: Search, key: tuple[int, int, int], data: RequestData, candidate: Candidate) -> bool:
    # A selector error on a device the search never reached is not the search's error: the device
    # simply does not count as matching here.
    try:
        return search.is_selectable(key, data, candidate)
    except SearchError:
        return False
