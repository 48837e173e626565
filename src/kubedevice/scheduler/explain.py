"""What the allocator says when it finds nothing: the first request that cannot be met even alone."""

from __future__ import annotations

from collections.abc import Sequence

from kubedevice.scheduler.request import ClaimToAllocate
from kubedevice.scheduler.search import Candidate, RequestData, Search, SearchError

_NO_CAPACITY = "its capacity cannot hold the request (too little left, or outside its requestPolicy)"
_NO_COMBINATION = "no combination of free devices satisfies every request and constraint"


def explain_failure(search: Search, claims: Sequence[ClaimToAllocate]) -> str:
    """The first request, in search order, that cannot be met even alone; else the combination text.

    A `firstAvailable` request is tested by its first subrequest. "Free" counts the matching devices
    not in use before the search (any matching device, for a request with admin access) that the request
    tolerates the taints of, whose shared counters are left and that can hold the request's consumable
    capacity beside what allocated claims consume; the first device ruled out by one of those is named.
    """
    for c, claim in enumerate(claims):
        for r, request in enumerate(claim.spec.requests):
            data = search.request_data[(c, r, 0)]
            where = f'ResourceClaim {claim.key}, request "{request.name}": '
            if data.all_mode:
                wanted = len(data.all_devices)
                free, why = _free(search, data, [d for d in data.all_devices if _unused(search, data, d)])
                if wanted == 0 or free < wanted:
                    return f"{where}all {wanted} matching device(s) wanted, {free} free{why}"
                continue
            matching = [
                candidate
                for candidate in search.candidates
                if _unused(search, data, candidate) and _matches(search, (c, r, 0), data, candidate)
            ]
            free, why = _free(search, data, matching)
            if free < data.num_devices:
                return f"{where}{data.num_devices} matching device(s) wanted, {free} free{why}"
    return _NO_COMBINATION


def _unused(search: Search, data: RequestData, candidate: Candidate) -> bool:
    return data.admin_access or candidate.id not in search.in_use


def _free(search: Search, data: RequestData, matching: list[Candidate]) -> tuple[int, str]:
    """How many of the matching devices the request could take, and why the first one it cannot was
    ruled out (a taint, its shared counters, its capacity), as a suffix of the message."""
    free = 0
    why = ""
    for candidate in matching:
        taint = search.untolerated_taint(data, candidate)
        if taint is not None:
            why = (
                why
                or f"; {candidate.text()} has the taint {taint.text()}, which the request does not tolerate"
            )
        elif not data.admin_access and not search.counters_available(candidate):
            why = why or f"; {candidate.text()}: the shared counters it consumes are used up"
        elif not search.capacity_fits(data, candidate):
            why = why or f"; {candidate.text()}: {_NO_CAPACITY}"
        else:
            free += 1
    return free, why


def _matches(search: Search, key: tuple[int, int, int], data: RequestData, candidate: Candidate) -> bool:
    # A selector error on a device the search never reached is not the search's error: the device
    # simply does not count as matching here.
    try:
        return search.is_selectable(key, data, candidate)
    except SearchError:
        return False
