"""Binding conditions as the scheduler's PreBind and PostFilter decide them (controlplane.binding): when a
pod waits, what it waits for and until when, a failure condition, the timeout from the allocation's
timestamp, and which failed claims the daemon deallocates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubedevice.controlplane.binding import (
    BINDING_PENDING,
    BindingFailure,
    BindingWait,
    BindingWaits,
    binding_release,
    pod_binding,
)
from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore
from kubedevice.dra.types import DRAPod
from kubedevice.resource.device_status import AllocatedDeviceStatus, DeviceCondition
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ConsumerReference,
    DeviceRequestAllocationResult,
    ObjectMeta,
    ResourceClaimSpec,
)
from kubedevice.scheduler.request import SCHEDULER_ERROR

NOW = datetime(2026, 7, 24, 10, 0, 0, tzinfo=UTC)
STAMP = "2026-07-24T09:59:00Z"


def result(device: str, *conditions: str, failures: tuple[str, ...] = ()) -> DeviceRequestAllocationResult:
    return DeviceRequestAllocationResult(
        "gpu",
        "gpu.example.com",
        "node-1",
        device,
        binding_conditions=conditions,
        binding_failure_conditions=failures,
    )


def claim(
    name: str,
    *results: DeviceRequestAllocationResult,
    stamp: str | None = STAMP,
    status: dict[str, str] | None = None,
) -> ClaimDocument:
    """`status`: condition type -> status, reported for every result's device."""
    status = status or {}
    entries = tuple(
        AllocatedDeviceStatus(
            r.driver,
            r.pool,
            r.device,
            conditions=tuple(
                DeviceCondition(t, s, reason="Why", message="it said") for t, s in status.items()
            ),
        )
        for r in results
    )
    return ClaimDocument(
        ObjectMeta(name, "default", uid=f"uid-{name}"),
        ResourceClaimSpec(),
        allocation=AllocationResult(results, allocation_timestamp=stamp),
        device_status=entries if status else (),
    )


def test_a_pod_without_binding_conditions_goes_on() -> None:
    assert pod_binding([claim("c", result("gpu-0"))], NOW, 600) is None


def test_a_pod_waits_for_each_condition_until_the_timeout_from_the_allocation() -> None:
    waiting = pod_binding(
        [claim("c", result("gpu-0", "x.io/attached", "x.io/ready"), status={"x.io/attached": "True"})],
        NOW,
        600,
    )
    assert isinstance(waiting, BindingWait)
    assert [w.missing for w in waiting.waits] == [("x.io/ready",)]
    assert waiting.deadline == datetime(2026, 7, 24, 10, 9, 0, tzinfo=UTC)
    assert waiting.detail() == (
        "claim default/c: gpu.example.com/node-1/gpu-0 waits for x.io/ready to be True "
        "(binding times out at 2026-07-24T10:09:00Z)"
    )
    ready = claim("c", result("gpu-0", "x.io/attached"), status={"x.io/attached": "True"})
    assert pod_binding([ready], NOW, 600) is None


@pytest.mark.parametrize(
    ("seconds", "timed_out"),
    [(59, True), (60, False), (61, False)],
)
def test_the_timeout_counts_once_passed(seconds: int, timed_out: bool) -> None:
    outcome = pod_binding([claim("c", result("gpu-0", "x.io/attached"))], NOW, seconds)
    assert isinstance(outcome, BindingFailure) == timed_out
    if timed_out:
        assert isinstance(outcome, BindingFailure)
        assert outcome.message == 'running PreBind plugin "DynamicResources": claim c binding timeout'


def test_an_allocation_without_a_timestamp_never_times_out() -> None:
    outcome = pod_binding(
        [claim("c", result("gpu-0", "x.io/attached"), stamp=None)], NOW + timedelta(days=9), 1
    )
    assert isinstance(outcome, BindingWait) and outcome.deadline is None


def test_a_failure_condition_fails_the_binding_in_upstreams_words() -> None:
    failing = claim(
        "c", result("gpu-0", "x.io/attached", failures=("x.io/failed",)), status={"x.io/failed": "True"}
    )
    outcome = pod_binding([claim("ok", result("gpu-1")), failing], NOW, 600)
    assert outcome == BindingFailure("default/c", 'claim c binding failed: reason=Why, message="it said"')
    # A failure condition that is not True is no failure.
    quiet = claim(
        "c", result("gpu-0", "x.io/attached", failures=("x.io/failed",)), status={"x.io/failed": "False"}
    )
    assert isinstance(pod_binding([quiet], NOW, 600), BindingWait)


def _store(**records: ClaimRecord) -> ClaimStore:
    return ClaimStore({f"default/{k}": v for k, v in records.items()})


def _reserved(*uids: str) -> tuple[ConsumerReference, ...]:
    return tuple(ConsumerReference("pods", u, u) for u in uids)


def test_only_a_daemon_allocation_held_by_no_other_pod_is_deallocated() -> None:
    allocation = AllocationResult((result("gpu-0", "x.io/a"),), allocation_timestamp=STAMP)
    store = _store(
        mine=ClaimRecord("u1", allocation=allocation, reserved_for=_reserved("p")),
        shared=ClaimRecord("u2", allocation=allocation, reserved_for=_reserved("p", "q")),
        user=ClaimRecord("u3", reserved_for=_reserved("p")),
        made=ClaimRecord("u4", generated_for="p", allocation=allocation, reserved_for=_reserved("p")),
    )
    assert binding_release(store, "default/mine", "p") == {"default/mine": None}
    assert binding_release(store, "default/shared", "p") is None
    assert binding_release(store, "default/user", "p") is None
    assert binding_release(store, "default/gone", "p") is None
    # A generated claim's record stays (its pod still owns it), without its allocation.
    assert binding_release(store, "default/made", "p") == {
        "default/made": ClaimRecord("u4", generated_for="p")
    }


def test_the_next_wait_says_why_the_last_attempt_failed() -> None:
    waits = BindingWaits("node-1", 600)
    pod = DRAPod("p", "default", "p")
    allocation = AllocationResult(
        (result("gpu-0", "x.io/a", failures=("x.io/f",)),), allocation_timestamp=STAMP
    )
    store = _store(c=ClaimRecord("uid-c", allocation=allocation, reserved_for=_reserved("p")))
    failed = claim("c", *allocation.results, status={"x.io/f": "True"})
    step = waits.check(pod, [failed], store, NOW)
    said = 'running PreBind plugin "DynamicResources": claim c binding failed: reason=Why, message="it said"'
    assert step.waiting is not None and (step.waiting.reason, step.waiting.message) == (SCHEDULER_ERROR, said)
    assert step.release == {"default/c": None}
    step = waits.check(pod, [claim("c", *allocation.results)], store, NOW)
    assert step.waiting is not None and step.waiting.reason == BINDING_PENDING
    assert step.waiting.message == "waiting for binding conditions for device on node node-1"
    assert step.waiting.detail.endswith(
        f"; the last binding attempt: {said}; deallocation of ResourceClaim completed"
    )
    assert waits.check(pod, [claim("c", result("gpu-0"))], store, NOW).waiting is None
    # Once bound, the failure is forgotten.
    step = waits.check(pod, [claim("c", *allocation.results)], store, NOW)
    assert step.waiting is not None and "the last binding attempt" not in step.waiting.detail
