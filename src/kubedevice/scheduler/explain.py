"""What the allocator says when it finds nothing: the first request that cannot be met even alone."""

from __future__ import annotations

from collections.abc import Sequence

from kubedevice.scheduler.request import ClaimToAllocate
from kubedevice.scheduler.search import Candidate, RequestData, Search, SearchError

_NO_COMBINATION = "no combination of free devices satisfies every request and constraint"


def explain_failure(search: Search, claims: Sequence[ClaimToAllocate]) -> str:
    """The first request, in search order, that cannot be met even alone; else the combination text.

    A `firstAvailable` request is tested by its first subrequest. "Free" counts the matching devices
    not in use before the search (any matching device, for a request with admin access) that can hold
    the request's consumable capacity beside what allocated claims consume.
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
                and search.capacity_fits(data, candidate)
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
