"""The DRA manager's pure parts: claim name resolution, the claim-info cache and what a container gets."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from kubedevice.checkpoint import encode_dra, encode_dra_pieces
from kubedevice.checkpoint.dra_model import ClaimInfoState, DRACheckpointData, DRADevice
from kubedevice.dra.claim_info import ClaimInfo, ClaimInfoCache
from kubedevice.dra.claim_names import check_owner, check_reserved, pod_claim_names
from kubedevice.dra.container_claims import (
    dynamic_resources,
    get_container_claim_infos,
    get_resources,
    prepared_on_record,
)
from kubedevice.dra.errors import ContainerClaimsError, DRAError
from kubedevice.dra.types import (
    AllocationResult,
    ConsumerReference,
    ContainerClaim,
    DeviceRequestAllocationResult,
    DRAContainer,
    DRAPod,
    ExtendedResourceClaimStatus,
    OwnerReference,
    PodClaim,
    RequestMapping,
    ResourceClaim,
)


def _pod(*claims: PodClaim, statuses: dict[str, str | None] | None = None, **kw: object) -> DRAPod:
    return DRAPod("P", "default", "p", resource_claims=claims, claim_statuses=statuses or {}, **kw)  # type: ignore[arg-type]


def test_claim_names_in_spec_order_then_the_extended_resource_claim() -> None:
    pod = _pod(
        PodClaim("a", resource_claim_name="c1"),
        PodClaim("b", resource_claim_template_name="t"),
        PodClaim("skip", resource_claim_template_name="t"),
        statuses={"b": "p-b-x7k2q", "skip": None},
        extended_resource_claim=ExtendedResourceClaimStatus("p-extended-resources-abcde"),
    )
    names = [(n.pod_claim, n.claim_name, n.check_owner) for n in pod_claim_names(pod)]
    assert names == [
        ("a", "c1", False),
        ("b", "p-b-x7k2q", True),
        ("", "p-extended-resources-abcde", False),
    ]


def test_claim_names_errors_are_the_kubelets_texts() -> None:
    with pytest.raises(DRAError, match=r'^pod "default/p": ResourceClaim not created yet$'):
        pod_claim_names(_pod(PodClaim("b", resource_claim_template_name="t")))
    with pytest.raises(
        DRAError, match=r'^pod "default/p", spec.resourceClaim "x": none of the supported fields are set$'
    ):
        pod_claim_names(_pod(PodClaim("x")))


def test_owner_and_reservation_checks() -> None:
    pod = _pod()
    claim = ResourceClaim("default", "p-gpu-x", "u1", reserved_for=(ConsumerReference("pods", "q", "Q"),))
    with pytest.raises(DRAError, match=r"^pod p \(P\) is not allowed to use ResourceClaim p-gpu-x \(u1\)$"):
        check_reserved(pod, claim)
    with pytest.raises(
        DRAError,
        match=r"^ResourceClaim default/p-gpu-x was not created for pod default/p \(pod is not owner\)$",
    ):
        check_owner(pod, claim)
    owned = ResourceClaim(
        "default",
        "p-gpu-x",
        "u1",
        reserved_for=(ConsumerReference("pods", "p", "P"),),
        owner_references=(OwnerReference("v1", "Pod", "p", "P", controller=True),),
    )
    check_owner(pod, owned)
    check_reserved(pod, owned)
    not_controller = ResourceClaim(
        "default",
        "p-gpu-x",
        "u1",
        owner_references=(OwnerReference("v1", "Pod", "p", "P", controller=False),),
    )
    with pytest.raises(DRAError, match="pod is not owner"):
        check_owner(pod, not_controller)


def _dev(name: str, *cdi: str, requests: tuple[str, ...] | None = None) -> DRADevice:
    return DRADevice("node-1", name, request_names=requests, cdi_device_ids=cdi or None)


def _cache_with(*infos: ClaimInfo) -> ClaimInfoCache:
    cache = ClaimInfoCache()
    for info in infos:
        cache.add(info)
    return cache


def test_request_filtering_scenario_18() -> None:
    info = ClaimInfo("u1", "c", "default", {"P"})
    info.set_devices(
        "gpu.example.com",
        (_dev("gpu-0", "g/gpu=0", requests=("gpu",)), _dev("common", "g/gpu=common")),
    )
    info.set_devices("nic.example.com", (_dev("eth0", "n/nic=eth0", requests=("nic",)),))
    cache = _cache_with(info)
    pod = _pod(PodClaim("c", resource_claim_name="c"))
    only_gpu = DRAContainer("main", (ContainerClaim("c", "gpu"),))
    everything = DRAContainer("side", (ContainerClaim("c"),))
    assert get_resources(cache, pod, only_gpu) == ["g/gpu=0", "g/gpu=common"]
    assert get_resources(cache, pod, everything) == ["g/gpu=0", "g/gpu=common", "n/nic=eth0"]


def test_subrequest_names_serve_their_request() -> None:
    info = ClaimInfo("u1", "c", "default", {"P"})
    info.set_devices("d", (_dev("gpu-0", "g/gpu=0", requests=("gpu/large",)),))
    pod = _pod(PodClaim("c", resource_claim_name="c"))
    assert get_resources(_cache_with(info), pod, DRAContainer("m", (ContainerClaim("c", "gpu"),))) == [
        "g/gpu=0"
    ]


def test_get_resources_orders_by_pod_claims_drops_repeats_and_adds_the_special_claim() -> None:
    c1 = ClaimInfo("u1", "c1", "default", {"P"})
    c1.set_devices("b.example.com", (_dev("d1", "x/a=shared", "x/a=1"),))
    c2 = ClaimInfo("u2", "c2", "default", {"P"})
    c2.set_devices("a.example.com", (_dev("d2", "x/a=2", "x/a=shared"),))
    special = ClaimInfo("u3", "p-extended-resources-abcde", "default", {"P"})
    special.set_devices("a.example.com", (_dev("d3", "x/a=3"),))
    pod = _pod(
        PodClaim("second", resource_claim_name="c2"),
        PodClaim("first", resource_claim_name="c1"),
        extended_resource_claim=ExtendedResourceClaimStatus(
            "p-extended-resources-abcde",
            (RequestMapping("main", "example.com/gpu", "container-0-request-0"),),
        ),
    )
    container = DRAContainer("main", (ContainerClaim("first"), ContainerClaim("second")))
    cache = _cache_with(c1, c2, special)
    assert get_resources(cache, pod, container) == ["x/a=2", "x/a=shared", "x/a=1", "x/a=3"]
    assert [i.claim_name for i in get_container_claim_infos(cache, pod, container)] == [
        "c2",
        "c1",
        "p-extended-resources-abcde",
    ]


def test_missing_entries_fail_with_the_kubelets_texts() -> None:
    pod = _pod(PodClaim("a", resource_claim_name="c1"))
    container = DRAContainer("main", (ContainerClaim("a"),))
    with pytest.raises(
        ContainerClaimsError,
        match=r"^internal error: unable to get claim info for ResourceClaim c1 in namespace default$",
    ):
        get_resources(ClaimInfoCache(), pod, container)
    with pytest.raises(ContainerClaimsError, match=r"^unable to get information for ResourceClaim c1$"):
        get_container_claim_infos(ClaimInfoCache(), pod, container)


def test_prepared_on_record_needs_every_claim_listing_the_pod_with_every_drivers_devices() -> None:
    """What a restarted daemon reads from the restored checkpoint to tell a pod that ran."""
    claims = (PodClaim("a", resource_claim_name="c1"), PodClaim("b", resource_claim_template_name="t"))
    pod = _pod(*claims, statuses={"b": "p-b-x7k2q"})
    c1 = ClaimInfo("u1", "c1", "default", {"P"}, driver_state=dict.fromkeys(["a.com", "b.com"]))
    generated = ClaimInfo("u2", "p-b-x7k2q", "default", {"P"}, driver_state={"a.com": None})
    cache = _cache_with(c1, generated)
    assert not prepared_on_record(cache, pod)  # the cache pass wrote the entries: no devices yet
    c1.set_devices("a.com", (_dev("d1", "a.com/g=1"),))
    generated.set_devices("a.com", (_dev("d2", "a.com/g=2"),))
    assert not prepared_on_record(cache, pod)  # b.com has not answered
    c1.set_devices("b.com", (_dev("d3"),))
    assert prepared_on_record(cache, pod)
    assert not prepared_on_record(cache, replace(pod, uid="Q"))  # entries of another pod
    assert not prepared_on_record(_cache_with(c1), pod)  # the generated claim's entry is missing
    assert not prepared_on_record(cache, _pod(*claims))  # not created yet: cannot tell
    assert not prepared_on_record(cache, _pod())  # no claims: nothing to tell from


def test_podresources_quirk_b9_cdi_lists_grow_within_a_driver() -> None:
    info = ClaimInfo("u1", "c", "default", {"P"})
    info.set_devices("x.com", (_dev("d1", "x.com/a=1"), _dev("d2", "x.com/a=2")))
    info.set_devices("a.com", (_dev("e1", "a.com/b=1"),))
    (resource,) = dynamic_resources([info.to_state()])
    assert resource.claim_name == "c"
    assert resource.claim_namespace == "default"
    assert [(r.driver_name, r.device_name, r.cdi_devices) for r in resource.claim_resources] == [
        ("a.com", "e1", ("a.com/b=1",)),
        ("x.com", "d1", ("x.com/a=1",)),
        ("x.com", "d2", ("x.com/a=1", "x.com/a=2")),
    ]


def test_set_devices_replaces_a_drivers_list_instead_of_appending_b1() -> None:
    claim = ResourceClaim(
        "default",
        "c1",
        "u1",
        allocation=AllocationResult(
            (
                DeviceRequestAllocationResult("gpu", "gpu.example.com", "node-1", "gpu-0"),
                DeviceRequestAllocationResult("nic", "nic.example.com", "node-1", "eth0"),
            )
        ),
    )
    info = ClaimInfo.from_claim(claim)
    assert info.driver_state == {"gpu.example.com": None, "nic.example.com": None}
    info.set_devices("gpu.example.com", (_dev("gpu-0", "g/gpu=0"),))
    info.set_devices("gpu.example.com", (_dev("gpu-0", "g/gpu=0"),))
    assert info.driver_state["gpu.example.com"] == (_dev("gpu-0", "g/gpu=0"),)
    info.set_devices("nic.example.com", ())
    assert info.to_state().driver_state == {
        "gpu.example.com": (_dev("gpu-0", "g/gpu=0"),),
        "nic.example.com": None,
    }


def test_restore_and_snapshot_sort_by_namespace_and_name() -> None:
    cache = ClaimInfoCache()
    states = (
        ClaimInfoState("u2", "b", "ns", frozenset({"p"}), {"d": None}),
        ClaimInfoState("u1", "a", "ns", frozenset({"p", "q"}), {"d": (_dev("x"),)}),
    )
    cache.restore(DRACheckpointData(states))
    assert [e.claim_name for e in cache.entries()] == ["a", "b"]
    assert all(not e.prepared for e in cache.entries())
    assert [e.to_state() for e in cache.entries()] == [states[1], states[0]]
    assert b"".join(encode_dra_pieces(cache.pieces())) == encode_dra(DRACheckpointData(states))
    assert cache.pods_with_claims() == {"p": ("ns", ["a", "b"]), "q": ("ns", ["a"])}
    assert cache.claim_names_for_pod("q") == ["a"]
    assert cache.has_pod_reference("p") and not cache.has_pod_reference("z")
    # A change re-encodes only its entry, and the file is still the whole cache's, byte for byte.
    untouched = cache.entries()[1].encoded
    cache.entries()[0].add_pod("r")
    cache.entries()[0].set_devices("d", (_dev("y", "a.com/b=y"),))
    now = tuple(e.to_state() for e in cache.entries())
    assert b"".join(encode_dra_pieces(cache.pieces())) == encode_dra(DRACheckpointData(now))
    assert cache.entries()[1].encoded is untouched


async def test_claim_locks_serialise_one_claim_and_are_dropped_when_unused() -> None:
    cache = ClaimInfoCache()
    order: list[str] = []
    inside = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with cache.locked(["ns/b", "ns/a"]):
            order.append("first in")
            inside.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        await inside.wait()
        async with cache.locked(["ns/a"]):
            order.append("second in")

    async def unrelated() -> None:
        await inside.wait()
        async with cache.locked(["ns/c"]):
            order.append("unrelated in")

    tasks = [asyncio.create_task(f()) for f in (first, second, unrelated)]
    await inside.wait()
    for _ in range(1000):  # loop turns, not time: until the second task waits on claim a's lock
        if cache._waiters.get("ns/a") == 2 and "unrelated in" in order:
            break
        await asyncio.sleep(0)
    assert order == ["first in", "unrelated in"]
    release.set()
    await asyncio.gather(*tasks)
    assert order == ["first in", "unrelated in", "first out", "second in"]
    assert cache._locks == {} and cache._waiters == {}
