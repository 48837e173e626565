"""What the allocator says when it finds nothing: the message (the first request that cannot be met even
alone) and the explanation (per request, how many devices each rule ruled out, and the first of them).

The explanation is computed only on failure, in one pass per request (and per subrequest tried) over the
search's candidates, and never raises. It follows a greedy pass over the pod's requests in search order:

- each request looks at every candidate in search order and asks the rules of `CHECKS`, in RULES order;
  a device counts under the first rule that rules it out, and passes ("fits") when none does;
- "in use": the device is held by an allocated claim (`AllocationRequest.in_use`), or was taken by an
  earlier request in this pass; for a request with `adminAccess`, only taken by an earlier request of
  the same claim (the search's rule);
- "node": a device with its own node selection (per-device node selection) that leaves this node out;
- "taint": a `NoSchedule`/`NoExecute` taint the request does not tolerate; "counters": the shared
  counters it consumes are used up; "capacity": the capacity the request asks does not fit beside what
  allocated claims consume. These are the search's own checks (Search.untolerated_taint,
  counters_available, capacity_fits), on the state the failed search left: what this pass took for
  earlier requests is not counted by them;
- "constraint": the device cannot join the devices taken before it by the requests a `matchAttribute`
  of its claim names (it lacks the attribute, or its value meets none of theirs), or a
  `distinctAttribute` names (a device before it has one of its values), those taken before it within
  the same request included;
- a request takes the first devices that fit, as many as it wants (`All`: every matching device); a
  request that cannot get all it wants takes nothing, so the requests after it are explained as if it
  were not there. A `firstAvailable` request explains each of its subrequests and takes from the first
  one that can get all it wants.

So a request whose `fit` is below `wanted` cannot be met even after the requests before it; when every
request fits, the failure is in the combination (what the greedy pass took is not what the search needs).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kubedevice.resource.model import DeviceID, SelectorCompileError
from kubedevice.scheduler.candidate import Candidate, lookup_attribute
from kubedevice.scheduler.cel import CelRuntimeError
from kubedevice.scheduler.constraints import Constraint, DistinctAttribute, MatchAttribute
from kubedevice.scheduler.explanation import RULES, RequestExplanation, RuledOut
from kubedevice.scheduler.request import ClaimToAllocate
from kubedevice.scheduler.search import RequestData, Search, SearchError

__all__ = ["CHECKS", "Check", "explain_failure", "explain_requests"]

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
    ruled out (the explanation's rules for a taint, its shared counters, its capacity), as a suffix of the
    message."""
    rules = RulePass(search, 0, "")
    free = 0
    why = ""
    for candidate in matching:
        ruled = _first_of(_DEVICE_RULES, rules, data, candidate)
        if ruled is None:
            free += 1
        elif not why:
            name, text = ruled
            where = f"{candidate.text()} has the taint" if name == "taint" else f"{candidate.text()}:"
            why = f"; {where} {text}"
    return free, why


def _matches(search: Search, key: tuple[int, int, int], data: RequestData, candidate: Candidate) -> bool:
    # A selector error on a device the search never reached is not the search's error: the device
    # simply does not count as matching here.
    try:
        return search.is_selectable(key, data, candidate)
    except SearchError:
        return False


# --- the explanation ---------------------------------------------------------------------------------


@dataclass(slots=True)
class RulePass:
    """What a rule may read while one request is explained: the search (its candidates, selectors and
    devices in use), the claim, and what the greedy pass took so far. Rules never change it."""

    search: Search
    #: The claim's index in the search, and its `namespace/name`.
    claim: int
    claim_key: str
    #: device -> (claim index, `claim, request "name"`) of each request of the pass that took it.
    taken: dict[DeviceID, list[tuple[int, str]]] = field(default_factory=dict)
    #: The claim's constraints, copies of the search's (its own are left untouched), holding the
    #: devices this pass took.
    constraints: list[Constraint] = field(default_factory=list)


#: A rule's check of one candidate for one request: None when the device passes, else what to say about
#: it ("" for nothing more). Checks read, never change, the pass and the search.
Check = Callable[[RulePass, RequestData, Candidate], str | None]


def _in_use(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    holders = p.taken.get(candidate.id, ())
    if data.admin_access:
        mine = [who for c, who in holders if c == p.claim]
        return f"taken by {mine[0]}" if mine else None
    if candidate.id in p.search.in_use:
        return "held by an allocated claim"
    return f"taken by {holders[0][1]}" if holders else None


def _class_selector(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    return _failed_selector(p.search, candidate, data.device_class.selectors)


def _request_selector(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    return _failed_selector(p.search, candidate, data.selectors)


def _failed_selector(search: Search, candidate: Candidate, selectors: Sequence[str]) -> str | None:
    """The first selector false on the device (its expression, with the error when it failed on it);
    None when all are true."""
    failed = search.failed_selector(candidate, selectors)
    if failed is None:
        return None
    i, err = failed
    if isinstance(err, SelectorCompileError):
        return f"{selectors[i]} (CEL compile error: {err.message})"
    if isinstance(err, CelRuntimeError):
        return f"{selectors[i]} (CEL runtime error: {err.message})"
    return selectors[i]


def _constraint(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    request, subrequest = _names(data)
    for constraint in p.constraints:
        # The search's own add/remove, on the pass's copies: added and given back at once.
        if constraint.add(request, subrequest, candidate):
            constraint.remove(request, subrequest, candidate)
            continue
        return _constraint_text(constraint, candidate)
    return None


def _constraint_text(constraint: Constraint, candidate: Candidate) -> str:
    if isinstance(constraint, MatchAttribute):
        kind, attribute = "matchAttribute", constraint.attribute
    elif isinstance(constraint, DistinctAttribute):
        kind, attribute = "distinctAttribute", constraint.attribute
    else:
        return type(constraint).__name__
    value = lookup_attribute(candidate, attribute)
    if value is None:
        return f"{kind} {attribute}: not set"
    mine = _values(value.as_set()[1])
    if isinstance(constraint, MatchAttribute):
        before = constraint.current
        shared = _values(before[1]) if before is not None else "none"
        return f"{kind} {attribute}: {mine}, the devices before: {shared}"
    return f"{kind} {attribute}: {mine} is taken by a device before"


def _values(values: frozenset[int | bool | str]) -> str:
    shown = [str(v).lower() if isinstance(v, bool) else str(v) for v in values]
    return ",".join(sorted(shown))


def _node(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    return None if p.search.node_matches(candidate) else "its own node selection leaves out this node"


def _taint(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    taint = p.search.untolerated_taint(data, candidate)
    return None if taint is None else f"{taint.text()}, which the request does not tolerate"


def _counters(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    # A request with admin access uses no counters (the search's rule).
    if data.admin_access or p.search.counters_available(candidate):
        return None
    return "the shared counters it consumes are used up"


def _capacity(p: RulePass, data: RequestData, candidate: Candidate) -> str | None:
    return None if p.search.capacity_fits(data, candidate) else _NO_CAPACITY


#: The rules the explanation asks of each candidate, in RULES order: a device counts under the first that
#: rules it out. A rule is one entry: a side-effect-free check, most of them the search's own (Search's
#: node_matches, untolerated_taint, counters_available, capacity_fits). Those see the search's state after
#: it failed (the allocated claims' devices, counters and shares), not what this pass took for earlier
#: requests: only "in use" and "constraint" follow the pass.
CHECKS: tuple[tuple[str, Check], ...] = (
    ("node", _node),
    ("in use", _in_use),
    ("class selector", _class_selector),
    ("request selector", _request_selector),
    ("taint", _taint),
    ("counters", _counters),
    ("capacity", _capacity),
    ("constraint", _constraint),
)
#: The rules the failure message names the first device of (the others are the message's own counts).
_DEVICE_RULES = tuple((name, check) for name, check in CHECKS if name in ("taint", "counters", "capacity"))


def explain_requests(search: Search, claims: Sequence[ClaimToAllocate]) -> tuple[RequestExplanation, ...]:
    """Per request (and per subrequest tried), in search order, what ruled the candidates out (see the
    module's text). Never raises: what was explained before a fault is returned."""
    out: list[RequestExplanation] = []
    # An explanation must never be why a pod's status cannot be written.
    with contextlib.suppress(Exception):
        _explain(search, claims, out)
    return tuple(out)


def _explain(search: Search, claims: Sequence[ClaimToAllocate], out: list[RequestExplanation]) -> None:
    taken: dict[DeviceID, list[tuple[int, str]]] = {}
    for c, claim in enumerate(claims):
        constraints: list[Constraint] = (
            copy.deepcopy(list(search.constraints[c])) if c < len(search.constraints) else []
        )
        p = RulePass(search, c, claim.key, taken, constraints)
        for r in range(len(claim.spec.requests)):
            chosen: tuple[RequestData, list[Candidate]] | None = None
            s = 0
            while (c, r, s) in search.request_data:
                data = search.request_data[(c, r, s)]
                explanation, take = _explain_one(p, data)
                out.append(explanation)
                if chosen is None and take:
                    chosen = (data, take)
                s += 1
            if chosen is not None:
                data, take = chosen
                request, subrequest = _names(data)
                who = f'{claim.key}, request "{data.result_name}"'
                for candidate in take:
                    # A device with allowMultipleAllocations is shared, never taken whole.
                    if not candidate.device.allow_multiple_allocations:
                        taken.setdefault(candidate.id, []).append((c, who))
                    for constraint in constraints:
                        constraint.add(request, subrequest, candidate)


def _explain_one(p: RulePass, data: RequestData) -> tuple[RequestExplanation, list[Candidate]]:
    """One request's pass over the candidates, and the devices it takes (none when it cannot get all it
    wants). The pass's constraints are as before when it returns."""
    wanted = data.num_devices
    counts: dict[str, _Tally] = {}
    fit = 0
    take: list[Candidate] = []
    request, subrequest = _names(data)
    try:
        for candidate in p.search.candidates:
            ruled = _first_of(CHECKS, p, data, candidate)
            if ruled is not None:
                name, detail = ruled
                counts.setdefault(name, _Tally(candidate.text(), detail)).count += 1
                continue
            fit += 1
            if data.all_mode or len(take) < wanted:
                take.append(candidate)
                for constraint in p.constraints:
                    constraint.add(request, subrequest, candidate)
    finally:
        for candidate in reversed(take):
            for constraint in reversed(p.constraints):
                constraint.remove(request, subrequest, candidate)
    ruled_out = tuple(
        RuledOut(rule, counts[rule].count, counts[rule].first, counts[rule].detail)
        for rule in RULES
        if rule in counts
    )
    explanation = RequestExplanation(
        claim=p.claim_key,
        request=data.result_name,
        wanted=wanted,
        candidates=len(p.search.candidates),
        fit=fit,
        ruled_out=ruled_out,
        all_mode=data.all_mode,
    )
    complete = len(take) == wanted and (wanted > 0 or not data.all_mode)
    return explanation, take if complete else []


@dataclass(slots=True)
class _Tally:
    """One rule's devices in one request's pass: the first one, what about it, and how many."""

    first: str
    detail: str
    count: int = 0


def _first_of(
    rules: Sequence[tuple[str, Check]], p: RulePass, data: RequestData, candidate: Candidate
) -> tuple[str, str] | None:
    """The first of `rules` that rules the device out, and what it says; None when it passes them all."""
    for name, check in rules:
        try:
            why = check(p, data, candidate)
        except Exception as err:  # a rule that fails on a device rules it out, saying why
            why = str(err) or type(err).__name__
        if why is not None:
            return name, why
    return None


def _names(data: RequestData) -> tuple[str, str]:
    """(request, subrequest) as constraints name them."""
    return (data.parent, data.name) if data.parent else (data.name, "")
