"""The search of the scheduler's structured allocator (`structured/internal/experimental/
allocator_experimental.go`, consumable capacity and the start location included).

A port, not a new design: claims, then requests, then the wanted devices one by one, each trying every
candidate in order (depth first; a request's next device only among the candidates after its previous
one); a candidate is taken and the search goes on, and given back when what follows finds nothing; the
first full solution wins. A device with allowMultipleAllocations is never taken whole: each taking is a
share of its capacity (scheduler/capacity.py). The names follow upstream's (`allocateOne`,
`allocateDevice`, `isSelectable`) so the two can be read side by side.

Where upstream checks each rule: `isSelectable` runs the class's selectors, the request's, then (a slice
with `perDeviceNodeSelection`) whether the device serves this node, cached per device and request;
`allocateDevice` then checks that the device is not in use, that the request tolerates its taints, that the
shared counters it consumes are left, and the constraints, and takes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kubedevice.resource.capacity import ConsumedCapacity
from kubedevice.resource.model import (
    DeviceClassDocument,
    DeviceID,
    SelectorCompileError,
)
from kubedevice.resource.quantity import Quantity
from kubedevice.resource.taints import DeviceTaint, DeviceToleration, tolerates
from kubedevice.scheduler.candidate import Candidate
from kubedevice.scheduler.capacity import AllocatingCapacity, capacity_fits, consumed_capacity
from kubedevice.scheduler.cel import CelRuntimeError, CelSelectors
from kubedevice.scheduler.constraints import Constraint
from kubedevice.scheduler.counters import SharedCounters

#: The API's limit on a claim's results (`AllocationResultsMaxSize`).
MAX_RESULTS = 32


class SearchError(Exception):
    """An error that ends the search for every claim of the pod; the message is upstream's."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _MaxSizeExceeded(Exception):
    """A subrequest would take a claim past 32 results: try the next subrequest (upstream's sentinel)."""


@dataclass(slots=True)
class RequestData:
    """One request without subrequests, or one subrequest (upstream's `requestData`)."""

    claim: str  # `ns/name`, for messages
    name: str  # the request's or the subrequest's own name
    parent: str | None  # the request holding this subrequest
    device_class: DeviceClassDocument
    selectors: tuple[str, ...]
    all_mode: bool
    admin_access: bool
    num_devices: int = 0
    #: `All` mode: the matching devices, found before the search.
    all_devices: list[Candidate] = field(default_factory=list)
    #: `capacity.requests`: what each device must provide (consumable capacity), or None.
    capacity: Mapping[str, Quantity] | None = None
    tolerations: tuple[DeviceToleration, ...] = ()

    @property
    def result_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclass(frozen=True, slots=True)
class Taken:
    """One device taken for a request, in the order taken (upstream's `internalDeviceResult`)."""

    request: str  # `<request>` or `<request>/<subrequest>`
    id: DeviceID
    admin_access: bool
    #: The request's tolerations, copied into the result.
    tolerations: tuple[DeviceToleration, ...]
    #: The device taken (its binding conditions and its slice go into the result).
    candidate: Candidate
    #: A share of a device with allowMultipleAllocations: what it consumes (None: the device is taken whole).
    consumed: ConsumedCapacity | None = None


class Search:
    """One allocation search over several claims (upstream's `allocator`)."""

    def __init__(
        self,
        claims: Sequence[str],
        request_counts: Sequence[int],
        request_data: dict[tuple[int, int, int], RequestData],
        constraints: Sequence[Sequence[Constraint]],
        candidates: Sequence[Candidate],
        in_use: frozenset[DeviceID] | set[DeviceID],
        selectors: CelSelectors,
        consumed: Mapping[DeviceID, ConsumedCapacity] | None = None,
        counters: SharedCounters | None = None,
    ) -> None:
        self.claims = claims
        self.request_counts = request_counts
        self.request_data = request_data
        self.constraints = constraints
        self.candidates = candidates
        self.in_use = in_use
        #: Shared devices of allocated claims: the capacity their shares consume (upstream's
        #: AggregatedCapacity); `in_use` holds the devices allocated whole.
        self.consumed: Mapping[DeviceID, ConsumedCapacity] = consumed or {}
        self.selectors = selectors
        self.counters = counters if counters is not None else SharedCounters((), frozenset())
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.results: list[list[Taken]] = [[] for _ in claims]
        self._allocating: dict[DeviceID, set[int]] = {}
        self._allocating_capacity = AllocatingCapacity()
        self._matches: dict[tuple[DeviceID, tuple[int, int, int]], bool] = {}

    def run(self) -> bool:
        try:
            return self._allocate_one(0, 0, 0, 0, False, 0)
        except _MaxSizeExceeded:
            return False

    # --- device checks ----------------------------------------------------------------------------

    def device_in_use(self, device: DeviceID) -> bool:
        return device in self.in_use or bool(self._allocating.get(device))

    def _allocating_for_claim(self, device: DeviceID, claim: int) -> bool:
        return claim in self._allocating.get(device, ())

    def capacity_fits(self, data: RequestData, candidate: Candidate) -> bool:
        """Whether the device can serve one more allocation for this request: the capacities asked are
        there, within its requestPolicy, and fit beside what allocated claims and this search consume
        (`CmpRequestOverCapacity`). No side effect."""
        capacity = candidate.device.capacity
        device = candidate.id
        allocated = self.consumed.get(device)
        allocating = self._allocating_capacity.get(device)
        # Nothing asked, nothing consumed, no policy: each capacity is consumed whole, which always fits.
        # Most devices end here, without the arithmetic.
        if (
            not data.capacity
            and allocated is None
            and allocating is None
            and all(entry.request_policy is None for entry in capacity.values())
        ):
            return True
        return capacity_fits(allocated, data.capacity, capacity, allocating)

    def capacity_in_use(self, device: DeviceID) -> bool:
        """Whether some share of the device consumes capacity, allocated or allocating (upstream's
        `deviceCapacityInUse`)."""
        return bool(self.consumed.get(device)) or device in self._allocating_capacity

    def is_selectable(self, key: tuple[int, int, int], data: RequestData, candidate: Candidate) -> bool:
        """The class's selectors, the request's, then per-device node selection; cached per (device,
        request) for this search."""
        match_key = (candidate.id, key)
        known = self._matches.get(match_key)
        if known is not None:
            return known
        matches = (
            self._selectors_match(data, candidate, data.device_class.selectors, True)
            and self._selectors_match(data, candidate, data.selectors, False)
            and self.node_matches(candidate)
        )
        self._matches[match_key] = matches
        return matches

    def node_matches(self, candidate: Candidate) -> bool:
        """Whether the device serves this node (false only for per-device node selection)."""
        return candidate.for_node

    def untolerated_taint(self, data: RequestData, candidate: Candidate) -> DeviceTaint | None:
        """The device's first taint that keeps it from the request (`NoSchedule` or `NoExecute`, not
        tolerated by any of the request's tolerations: upstream's `taintPreventsAllocation`), or None."""
        for taint in candidate.taints:
            if taint.blocks and not any(tolerates(t, taint) for t in data.tolerations):
                return taint
        return None

    def counters_available(self, candidate: Candidate) -> bool:
        """Whether the shared counters the device consumes are left, after the allocated devices and
        those taken so far in this search. A shared device with a share already consumes them."""
        if not candidate.counter_use or self._shared_in_use(candidate):
            return True
        return not candidate.counters_overdrawn and self.counters.available(candidate.counter_use)

    def _shared_in_use(self, candidate: Candidate) -> bool:
        return candidate.device.allow_multiple_allocations and self.capacity_in_use(candidate.id)

    def _selectors_match(
        self, data: RequestData, candidate: Candidate, selectors: tuple[str, ...], of_class: bool
    ) -> bool:
        failed = self.failed_selector(candidate, selectors)
        if failed is None:
            return True
        i, err = failed
        owner = f"class {data.device_class.meta.name}" if of_class else f"claim {data.claim}"
        if isinstance(err, SelectorCompileError):
            raise SearchError(f"{owner}: selector #{i}: CEL compile error: {err.message}") from err
        if isinstance(err, CelRuntimeError):
            raise SearchError(
                f"{owner}: selector #{i} on device {candidate.text()}: CEL runtime error: {err.message}"
            ) from err
        return False

    def failed_selector(
        self, candidate: Candidate, selectors: Sequence[str]
    ) -> tuple[int, SelectorCompileError | CelRuntimeError | None] | None:
        """The first of `selectors` that is false on the device (its index, None) or fails on it (its
        index, the error); None when every one is true. No side effect but the device's CEL view kept."""
        for i, expression in enumerate(selectors):
            if candidate.cel is None:
                candidate.cel = self.selectors.device(candidate.id[0], candidate.device)
            try:
                if not self.selectors.matches(expression, candidate.cel):
                    return i, None
            except (SelectorCompileError, CelRuntimeError) as err:
                return i, err
        return None

    # --- the search -------------------------------------------------------------------------------

    def _allocate_one(self, c: int, r: int, s: int, d: int, allocate_sub: bool, start: int) -> bool:
        """Device `d` of (sub)request (c, r, s); candidates before `start` were tried for the request's
        earlier devices (upstream's startLocation: combinations, not permutations, within a request)."""
        if c >= len(self.claims):
            return True
        if r >= self.request_counts[c]:
            try:
                return self._allocate_one(c + 1, 0, 0, 0, False, 0)
            except _MaxSizeExceeded:
                return False
        key = (c, r, s)
        data = self.request_data[key]
        if not allocate_sub and data.parent is not None:
            return self._allocate_first_available(c, r, d)
        if data.all_mode and not data.all_devices:
            return False
        if d >= data.num_devices:
            return self._allocate_one(c, r + 1, 0, 0, False, 0)
        if len(self.results[c]) + data.num_devices - d > MAX_RESULTS:
            raise _MaxSizeExceeded
        if data.all_mode:
            undo = self._allocate_device(c, data, data.all_devices[d], must=True)
            if undo is None:
                return False
            return self._go_on(c, r, s, d, allocate_sub, undo, 0)
        for index in range(start, len(self.candidates)):
            candidate = self.candidates[index]
            if data.admin_access:
                if self._allocating_for_claim(candidate.id, c):
                    continue
            elif self.device_in_use(candidate.id):
                continue
            if not self.is_selectable(key, data, candidate):
                continue
            if not self.capacity_fits(data, candidate):
                continue
            undo = self._allocate_device(c, data, candidate, must=False)
            if undo is None:
                continue
            if self._go_on(c, r, s, d, allocate_sub, undo, index + 1):
                return True
        return False

    def _go_on(
        self, c: int, r: int, s: int, d: int, allocate_sub: bool, undo: Callable[[], None], start: int
    ) -> bool:
        """The next wanted device; gives this one back when that finds nothing (or fails)."""
        try:
            done = self._allocate_one(c, r, s, d + 1, allocate_sub, start)
        except BaseException:
            undo()
            raise
        if not done:
            undo()
        return done

    def _allocate_first_available(self, c: int, r: int, d: int) -> bool:
        """Each subrequest in order; the first that leads to a full solution is kept."""
        all_exceeded = True
        sub = 0
        while (c, r, sub) in self.request_data:
            try:
                success = self._allocate_one(c, r, sub, d, True, 0)
            except _MaxSizeExceeded:
                sub += 1
                continue
            all_exceeded = False
            if success:
                self.selected_sub[(c, r)] = sub
                return True
            sub += 1
        if all_exceeded:
            raise _MaxSizeExceeded
        return False

    def _allocate_device(
        self, c: int, data: RequestData, candidate: Candidate, must: bool
    ) -> Callable[[], None] | None:
        """Takes the device (taints, counters and constraints permitting); returns how to give it back,
        or None. A device with allowMultipleAllocations is not taken whole: its share's capacity is added
        to the totals, and its counters are used once, by its first share (upstream's `skipCounterCheck`)."""
        device = candidate.id
        shared = candidate.device.allow_multiple_allocations
        if data.admin_access:
            if not shared and self._allocating_for_claim(device, c):
                return None
        elif self.device_in_use(device):
            return None
        # Checked again for `All` devices, chosen before the search (the loop's are checked just before);
        # before the constraints, so that a refusal leaves them untouched (upstream checks after, and
        # leaves them counting the device).
        if must and not self.capacity_fits(data, candidate):
            return None
        if candidate.taints and self.untolerated_taint(data, candidate) is not None:
            return None
        # A request with admin access uses no counters: the device's owner holds them already; nor does a
        # further share of a shared device.
        use = () if data.admin_access or self._shared_in_use(candidate) else candidate.counter_use
        if use:
            if not self.counters_available(candidate):
                return None
            self.counters.take(use)
        request, subrequest = (data.parent, data.name) if data.parent else (data.name, "")
        constraints = self.constraints[c]
        for i, constraint in enumerate(constraints):
            if constraint.add(request, subrequest, candidate):
                continue
            for earlier in constraints[:i]:
                earlier.remove(request, subrequest, candidate)
            self.counters.give_back(use)
            if must:
                raise SearchError(
                    f"claim {self.claims[c]}, request {data.name}: cannot add device {candidate.text()} "
                    "because a claim constraint would not be satisfied"
                )
            return None
        consumed = None
        if shared:
            consumed = consumed_capacity(data.capacity, candidate.device.capacity)
            self._allocating_capacity.insert(device, consumed)
        else:
            self._allocating.setdefault(device, set()).add(c)
        results = self.results[c]
        before = len(results)
        results.append(
            Taken(data.result_name, device, data.admin_access, data.tolerations, candidate, consumed)
        )

        def undo() -> None:
            for constraint in constraints:
                constraint.remove(request, subrequest, candidate)
            if consumed is None:
                self._allocating[device].discard(c)
            else:
                self._allocating_capacity.remove(device, consumed)
            self.counters.give_back(use)
            del results[before:]

        return undo
