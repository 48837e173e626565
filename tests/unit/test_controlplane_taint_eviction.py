"""The device taint eviction controller's rules (controlplane.taint_eviction), as upstream's
`claimEvictionTime`, `podEvictionTime`, `ruleMatchesDevice` and `maybeUpdateRuleStatus` decide them, and the
taints' first sightings kept on disk (controlplane.taint_times)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kubedevice.controlplane.taint_eviction import (
    DeviceTaints,
    Eviction,
    RuleCounts,
    TrackedTaint,
    claim_eviction,
    pod_eviction,
    rule_condition,
)
from kubedevice.controlplane.taint_times import TaintTimes
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ConsumerReference,
    DeviceRequestAllocationResult,
    DeviceTaintRuleDocument,
    ObjectMeta,
    ResourceClaimSpec,
)
from kubedevice.resource.slice_model import Pool, ResourceSliceDocument, SliceDevice
from kubedevice.resource.taints import DeviceTaint, DeviceTaintSelector, DeviceToleration

GPU = "gpu.example.com"
ADDED = datetime(2026, 7, 24, 10, 0, 0, tzinfo=UTC)
BROKEN = DeviceTaint("example.com/broken", "NoExecute", time_added="2026-07-24T10:00:00Z")


def pools(**devices: tuple[DeviceTaint, ...]) -> list[Pool]:
    slice_ = ResourceSliceDocument(
        ObjectMeta("s1"),
        GPU,
        node_name="node-1",
        pool="node-1",
        devices=tuple(SliceDevice(name, taints=taints) for name, taints in devices.items()),
    )
    return [Pool(GPU, "node-1", 1, (slice_,))]


def rule(
    name: str, effect: str = "NoExecute", device: str | None = "gpu-0", *, selector: bool = True
) -> DeviceTaintRuleDocument:
    taint = DeviceTaint("example.com/rule", effect, time_added="2026-07-24T11:00:00Z")
    chosen = DeviceTaintSelector(driver=GPU, device=device) if selector else None
    return DeviceTaintRuleDocument(ObjectMeta(name, uid=f"uid-{name}"), taint, chosen)


def claim(name: str, *tolerations: DeviceToleration, device: str = "gpu-0", pod: str = "p") -> ClaimDocument:
    result = DeviceRequestAllocationResult("gpu", GPU, "node-1", device, tolerations=tolerations)
    return ClaimDocument(
        ObjectMeta(name, "default"),
        ResourceClaimSpec(),
        allocation=AllocationResult((result,)),
        reserved_for=(ConsumerReference("pods", pod, pod),),
    )


def added(taint: TrackedTaint) -> datetime:
    assert taint.taint.time_added is not None
    return datetime.fromisoformat(taint.taint.time_added.replace("Z", "+00:00"))


def tolerate(
    seconds: int | None, effect: str = "NoExecute", key: str = "example.com/broken"
) -> DeviceToleration:
    return DeviceToleration(key, "Exists", effect=effect, toleration_seconds=seconds)


@pytest.mark.parametrize(
    ("tolerations", "after"),
    [
        ((), 0),  # not tolerated: at once
        ((tolerate(30),), 30),
        ((tolerate(30), tolerate(10)), 10),  # the smallest of those that match
        ((tolerate(-5),), 0),  # negative counts as 0
        ((tolerate(30), tolerate(None)), None),  # one without seconds tolerates it for good
        ((tolerate(30, key="example.com/other"),), 0),  # does not match the taint
        # Upstream counts only tolerations whose effect is NoExecute: an empty effect does not keep the pod.
        ((tolerate(None, effect=""),), 0),
    ],
)
def test_when_a_taint_evicts_a_claims_pods(
    tolerations: tuple[DeviceToleration, ...], after: int | None
) -> None:
    taints = DeviceTaints(pools(**{"gpu-0": (BROKEN,)}), [])
    eviction = claim_eviction(claim("c", *tolerations), taints, added)
    if after is None:
        assert eviction is None
    else:
        assert eviction is not None and eviction.when == ADDED + timedelta(seconds=after)
        assert [r.source() for r in eviction.reasons] == [f"ResourceSlice s1 {GPU}/node-1/gpu-0 taint #0"]


def test_only_noexecute_taints_count_and_a_rule_without_selector_selects_nothing() -> None:
    calm = (DeviceTaint("a.io/x", "NoSchedule"), DeviceTaint("a.io/y", "None"))
    taints = DeviceTaints(pools(**{"gpu-0": calm}), [rule("none", "None"), rule("all", selector=False)])
    assert taints.empty is False  # the selector-less NoExecute rule is there, but selects no device
    assert claim_eviction(claim("c"), taints, added) is None
    assert DeviceTaints(pools(**{"gpu-0": calm}), [rule("n", "NoSchedule")]).empty


def test_a_pod_goes_at_its_earliest_claim_for_every_taint_rules_first() -> None:
    taints = DeviceTaints(pools(**{"gpu-0": (BROKEN,), "gpu-1": ()}), [rule("maint", device="gpu-1")])
    slice_claim = claim("a", tolerate(60))
    rule_claim = claim(
        "b", DeviceToleration("example.com/rule", "Exists", effect="NoExecute"), device="gpu-1"
    )
    other = claim("c", device="gpu-1", pod="q")  # reserved for another pod: not this pod's
    eviction = pod_eviction("p", [slice_claim, rule_claim, other], taints, added)
    assert eviction is not None
    assert eviction.when == ADDED + timedelta(seconds=60)
    assert [r.text() for r in eviction.reasons] == [
        f"example.com/broken:NoExecute of ResourceSlice s1 {GPU}/node-1/gpu-0 taint #0 on {GPU}/node-1/gpu-0"
    ]
    untolerated = pod_eviction("p", [slice_claim, claim("d", device="gpu-1")], taints, added)
    assert untolerated is not None
    # The earliest: the slice's taint tolerated 60 s from 10:00, before the rule's added at 11:00.
    assert untolerated.when == ADDED + timedelta(seconds=60)
    assert [r.source() for r in untolerated.reasons] == [
        "DeviceTaintRule maint",
        f"ResourceSlice s1 {GPU}/node-1/gpu-0 taint #0",
    ]
    assert untolerated.rule_uids() == {"uid-maint"}
    assert pod_eviction("q", [slice_claim], taints, added) is None


@pytest.mark.parametrize(
    ("effect", "counts", "want"),
    [
        (
            "NoExecute",
            RuleCounts(1, 1),
            ("True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace."),
        ),
        (
            "NoExecute",
            RuleCounts(3, 2, evicted=1),
            (
                "True",
                "PodsPendingEviction",
                "3 pods need to be evicted in 2 different namespaces. "
                "1 pod evicted since starting the controller.",
            ),
        ),
        (
            "NoExecute",
            RuleCounts(evicted=2),
            ("False", "Completed", "2 pods evicted since starting the controller."),
        ),
        ("NoExecute", RuleCounts(), ("False", "NotStarted", "")),
        (
            "NoSchedule",
            RuleCounts(),
            ("False", "OtherEffect", "Eviction only happens for the NoExecute effect."),
        ),
        (
            "None",
            RuleCounts(1, 1, published=2, allocated=1),
            (
                "False",
                "NoEffect",
                "2 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 "
                "namespace if the effect was NoExecute. This information will not be updated again. Recreate "
                "the DeviceTaintRule to trigger an update.",
            ),
        ),
    ],
)
def test_a_rules_status_in_upstreams_words(
    effect: str, counts: RuleCounts, want: tuple[str, str, str]
) -> None:
    assert rule_condition(rule("r", effect), counts) == want


def test_first_sightings_are_kept_on_disk_and_forgotten_with_their_taint(tmp_path: Path) -> None:
    path = tmp_path / "device_taints.json"
    unstamped = DeviceTaint("example.com/broken", "NoExecute")
    on_device = TrackedTaint(unstamped, (GPU, "node-1", "gpu-0"), slice="s1")
    of_rule = TrackedTaint(unstamped, ("", "", ""), rule="maint", rule_uid="uid-maint")
    stamped = TrackedTaint(BROKEN, (GPU, "node-1", "gpu-1"), slice="s1")
    seen = datetime(2026, 7, 24, 12, 0, 0, 500000, tzinfo=UTC)

    async def run() -> None:
        times = TaintTimes(path)
        assert times.observe([on_device, of_rule, stamped], {(GPU, "node-1")}, seen)
        await times.commit()
        assert not times.observe([on_device, of_rule, stamped], {(GPU, "node-1")}, seen + timedelta(hours=1))
        await times.stop()

    asyncio.run(run())
    assert json.loads(path.read_text()) == {
        "version": 1,
        "firstSeen": [
            {
                "device": "gpu-0",
                "driver": GPU,
                "pool": "node-1",
                "taint": "example.com/broken:NoExecute",
                "time": "2026-07-24T12:00:00Z",
            },
            {"effect": "NoExecute", "rule": "uid-maint", "time": "2026-07-24T12:00:00Z"},
        ],
    }
    again = TaintTimes(path)
    again.load()
    whole_second = seen.replace(microsecond=0)
    assert (again.added(on_device), again.added(of_rule), again.added(stamped)) == (
        whole_second,
        whole_second,
        ADDED,
    )

    async def forget() -> None:
        # Its pool is not published (a restart wiped the slices): the device's entry stays; the rule's goes.
        assert again.observe([], set(), seen)
        await again.commit()
        await again.stop()

    asyncio.run(forget())
    assert [e.get("device") for e in json.loads(path.read_text())["firstSeen"]] == ["gpu-0"]


def test_an_unreadable_file_is_taken_as_empty(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "device_taints.json"
    path.write_text("{not json")
    (tmp_path / ".device_taints.json.123.tmp").write_text("left by a crash")
    times = TaintTimes(path)
    times.load()
    assert "ignoring" in caplog.text and not (tmp_path / ".device_taints.json.123.tmp").exists()
    assert isinstance(Eviction(ADDED, ()).joined(None), Eviction)
