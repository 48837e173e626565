"""A container's `allocatedResourcesStatus` from its claims, as the kubelet's DRA manager computes it
(`UpdateAllocatedResourcesStatus`), and the health cache's changes that concern pods."""

from __future__ import annotations

from kubedevice.api.drahealth.v1 import api_pb2 as health_pb
from kubedevice.checkpoint.dra_model import DRADevice
from kubedevice.dra.claim_info import ClaimInfo, ClaimInfoCache
from kubedevice.dra.health import DeviceHealthInfo, HealthCache
from kubedevice.dra.resource_health import (
    AllocatedResourceStatus,
    HealthLookup,
    ResourceHealth,
    allocated_resources_status,
    pods_using,
)
from kubedevice.dra.types import (
    ContainerClaim,
    DRAContainer,
    DRAPod,
    ExtendedResourceClaimStatus,
    PodClaim,
    RequestMapping,
)

GPU = "gpu.example.com"
NIC = "nic.example.com"


def _dev(name: str, *cdi: str, requests: tuple[str, ...] | None = None) -> DRADevice:
    return DRADevice("node-1", name, request_names=requests, cdi_device_ids=cdi or None)


def _health(reported: dict[tuple[str, str], tuple[str, str]]) -> HealthLookup:
    def health_of(driver: str, pool: str, device: str) -> DeviceHealthInfo:
        health, message = reported.get((driver, device), ("Unknown", ""))
        return DeviceHealthInfo(health, message, 0.0)

    return health_of


def _cache() -> ClaimInfoCache:
    cache = ClaimInfoCache()
    gpus = ClaimInfo("u1", "gpus", "default", {"P"})
    gpus.set_devices(
        GPU,
        (
            _dev("gpu-0", "g/gpu=0", requests=("big/large",)),
            _dev("gpu-1", requests=("small",)),
            # A second device behind the same CDI ID: listed once.
            _dev("gpu-2", "g/gpu=0", requests=("big",)),
        ),
    )
    # No request names: it serves every request.
    gpus.set_devices(NIC, (_dev("eth0", "n/nic=eth0"),))
    cache.add(gpus)
    made = ClaimInfo("u2", "p-tmpl-abcde", "default", {"P"})
    made.set_devices(GPU, (_dev("gpu-3", requests=("gpu",)),))
    cache.add(made)
    special = ClaimInfo("u3", "p-extended-resources-x", "default", {"P"})
    special.set_devices(GPU, (_dev("gpu-4", "g/gpu=4", requests=("container-0-request-0",)),))
    cache.add(special)
    return cache


def _pod(**statuses: str | None) -> DRAPod:
    return DRAPod(
        "P",
        "default",
        "p",
        resource_claims=(
            PodClaim("gpus", resource_claim_name="gpus"),
            PodClaim("tmpl", resource_claim_template_name="t"),
            PodClaim("absent", resource_claim_name="absent"),
        ),
        claim_statuses=statuses,
        extended_resource_claim=ExtendedResourceClaimStatus(
            "p-extended-resources-x",
            (RequestMapping("main", "example.com/gpu", "container-0-request-0"),),
        ),
    )


def test_entries_per_claim_and_request_with_the_kubelets_resource_ids() -> None:
    main = DRAContainer(
        "main",
        (
            ContainerClaim("gpus", "big"),
            ContainerClaim("gpus"),
            ContainerClaim("tmpl"),
            ContainerClaim("absent"),  # no cache entry: no entry
        ),
    )
    health = _health({(GPU, "gpu-0"): ("Unhealthy", "ECC errors"), (NIC, "eth0"): ("Healthy", "")})
    got = allocated_resources_status(_cache(), health, _pod(tmpl="p-tmpl-abcde"), main)
    assert got == [
        # The subrequest `big/large` serves `big`; gpu-2 shares gpu-0's first CDI ID.
        AllocatedResourceStatus(
            "claim:gpus/big",
            (ResourceHealth("g/gpu=0", "Unhealthy", "ECC errors"), ResourceHealth("n/nic=eth0", "Healthy")),
        ),
        AllocatedResourceStatus(
            "claim:gpus",
            (
                ResourceHealth("g/gpu=0", "Unhealthy", "ECC errors"),
                # No CDI ID: driver/pool/device; not reported: Unknown.
                ResourceHealth(f"{GPU}/node-1/gpu-1", "Unknown"),
                ResourceHealth("n/nic=eth0", "Healthy"),
            ),
        ),
        AllocatedResourceStatus("claim:tmpl", (ResourceHealth(f"{GPU}/node-1/gpu-3", "Unknown"),)),
        # The special claim of DRA-backed extended resources, by its claim and request names.
        AllocatedResourceStatus(
            "claim:p-extended-resources-x/container-0-request-0", (ResourceHealth("g/gpu=4", "Unknown"),)
        ),
    ]


def test_claims_not_made_or_not_serving_the_request_give_no_entry() -> None:
    side = DRAContainer("side", (ContainerClaim("tmpl"), ContainerClaim("gpus", "other")))
    cache = _cache()
    info = cache.get("default", "gpus")
    assert info is not None
    info.set_devices(NIC, (_dev("eth0", "n/nic=eth0", requests=("nic",)),))
    # The template's claim is not made yet (no status entry), and no device serves `other`.
    assert allocated_resources_status(cache, _health({}), _pod(), side) == []
    # A pod that needs no claim for the template (a null status entry).
    none = DRAContainer("side", (ContainerClaim("tmpl"),))
    assert allocated_resources_status(_cache(), _health({}), _pod(tmpl=None), none) == []


def test_pods_using_changed_devices() -> None:
    cache = _cache()
    other = ClaimInfo("u9", "shared", "default", {"Q", "R"})
    other.set_devices(GPU, (_dev("gpu-1"),))
    cache.add(other)
    assert pods_using(cache, GPU, [("node-1", "gpu-1")]) == ["P", "Q", "R"]
    assert pods_using(cache, NIC, [("node-1", "gpu-1")]) == []
    assert pods_using(cache, GPU, [("node-2", "gpu-1")]) == []


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _report(
    device: str, health: health_pb.HealthStatus, message: str = "", timeout: int = 0
) -> health_pb.DeviceHealth:
    return health_pb.DeviceHealth(
        device=health_pb.DeviceIdentifier(pool_name="node-1", device_name=device),
        health=health,
        message=message,
        health_check_timeout_seconds=timeout,
    )


def test_health_cache_update_returns_what_changed_as_the_kubelets_update_health_info() -> None:
    clock = Clock()
    heard: list[tuple[str, list[tuple[str, str]]]] = []
    cache = HealthCache(clock=clock, default_timeout=30, on_change=lambda d, k: heard.append((d, k)))
    healthy, unhealthy = health_pb.HEALTHY, health_pb.UNHEALTHY
    assert cache.update(GPU, [_report("gpu-0", healthy), _report("gpu-1", healthy, timeout=5)]) == [
        ("node-1", "gpu-0"),
        ("node-1", "gpu-1"),
    ]
    # The same list again: nothing changed, nobody told.
    assert cache.update(GPU, [_report("gpu-0", healthy), _report("gpu-1", healthy, timeout=5)]) == []
    # Another message or timeout is a change, as another health is.
    assert cache.update(
        GPU, [_report("gpu-0", healthy, "fan slow"), _report("gpu-1", unhealthy, timeout=5)]
    ) == [
        ("node-1", "gpu-0"),
        ("node-1", "gpu-1"),
    ]
    # gpu-1 is left out and its 5 s pass: it changes to Unknown once, at the next list.
    clock.now = 106.0
    assert cache.update(GPU, [_report("gpu-0", healthy, "fan slow")]) == [("node-1", "gpu-1")]
    assert cache.get(GPU, "node-1", "gpu-1").health == "Unknown"
    assert cache.update(GPU, [_report("gpu-0", healthy, "fan slow")]) == []
    assert cache.get(GPU, "node-1", "gpu-0") == DeviceHealthInfo("Healthy", "fan slow", 106.0)
    assert cache.get(GPU, "node-1", "gpu-9") == DeviceHealthInfo("Unknown", "", 0.0)
    assert [d for d, _ in heard] == [GPU, GPU, GPU]
