"""The SDK's DRA face with the features of Kubernetes 1.37, served over the real sockets into an in-memory
backend: health as taints (set, cleared, never stale after a restart), taints set by driver code, counter
sets, a device's status and binding conditions in its claim, and what prepare hands the hook of a share."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kubedevice.plugin import Device
from kubedevice.plugin.dra import (
    AllocatedDevice,
    ClaimRef,
    ClaimStatusError,
    CounterSet,
    DeviceCounterConsumption,
    DeviceTaint,
)
from kubedevice.plugin.dra.backend_api import PublishedDevice
from kubedevice.resource.device_status import DeviceCondition
from tests.dra_kubelet import DRIVER, MemoryBackend, make_claim, prepare
from tests.integration.dra_plugins import Gpus, HookedGpus, kubelet_dir, paths_of, running
from tests.waiting import poll_async

__all__ = ["kubelet_dir"]

UNHEALTHY = DeviceTaint("kubedevice.io/unhealthy", "NoExecute")
EARLIER = datetime(2026, 7, 1, 8, 0, 0, tzinfo=UTC)


class TaintedGpus(Gpus):
    health_taint = UNHEALTHY


def taints_of(backend: MemoryBackend) -> dict[str, list[str]]:
    """Each published device's taints, as `key:Effect@time`."""
    return {
        d.id: [
            f"{t.key}:{t.effect}@{t.time_added:%H:%M:%S}" if t.time_added else "unstamped" for t in d.taints
        ]
        for d in backend.published[-1]
    }


async def published(
    backend: MemoryBackend, wanted: dict[str, list[str]] | None = None, **match: object
) -> None:
    def ok() -> bool:
        if not backend.published:
            return False
        taints = {d.id: [f"{t.key}:{t.effect}" for t in d.taints] for d in backend.published[-1]}
        return wanted is None or taints == wanted

    await poll_async(ok, f"published {wanted}")


async def test_an_unhealthy_device_is_published_with_the_health_taint_until_it_recovers(
    kubelet_dir: Path,
) -> None:
    backend, plugin = MemoryBackend(), TaintedGpus()
    async with running(plugin, kubelet_dir, backend):
        await published(backend, {"gpu-0": [], "gpu-1": []})
        plugin.set_devices([Device("gpu-0"), Device("gpu-1", healthy=False)])
        await published(backend, {"gpu-0": [], "gpu-1": ["kubedevice.io/unhealthy:NoExecute"]})
        [taint] = backend.published[-1][1].taints
        assert taint.time_added is not None and abs(datetime.now(UTC) - taint.time_added) < timedelta(
            minutes=1
        )
        stamped = taint.time_added
        # Another change leaves the taint's time as it was.
        plugin.set_devices([Device("gpu-0", attributes={"x": 1}), Device("gpu-1", healthy=False)])
        await poll_async(lambda: backend.published[-1][0].attributes == {"x": 1}, "republished")
        assert backend.published[-1][1].taints[0].time_added == stamped
        plugin.set_devices([Device("gpu-0"), Device("gpu-1")])
        await published(backend, {"gpu-0": [], "gpu-1": []})


async def test_without_a_health_taint_an_unhealthy_device_is_not_published(kubelet_dir: Path) -> None:
    backend, plugin = MemoryBackend(), Gpus([Device("gpu-0"), Device("gpu-1", healthy=False)])
    async with running(plugin, kubelet_dir, backend):
        await poll_async(lambda: backend.published_ids() == ["gpu-0"], "the healthy device only")


async def test_a_restarted_driver_publishes_no_stale_taint_and_keeps_a_lasting_ones_time(
    kubelet_dir: Path,
) -> None:
    backend = MemoryBackend()
    # What the previous run published: both devices unhealthy since EARLIER.
    backend.published_taints = {
        (name, UNHEALTHY.key, "", UNHEALTHY.effect): EARLIER for name in ("gpu-0", "gpu-1")
    }
    plugin = TaintedGpus([Device("gpu-0"), Device("gpu-1", healthy=False)])
    async with running(plugin, kubelet_dir, backend):
        await published(backend, {"gpu-0": [], "gpu-1": ["kubedevice.io/unhealthy:NoExecute"]})
        assert backend.published[-1][1].taints[0].time_added == EARLIER
        # Healthy, then unhealthy again: a new taint, a new time.
        plugin.set_devices([Device("gpu-0"), Device("gpu-1")])
        await published(backend, {"gpu-0": [], "gpu-1": []})
        plugin.set_devices([Device("gpu-0"), Device("gpu-1", healthy=False)])
        await published(backend, {"gpu-0": [], "gpu-1": ["kubedevice.io/unhealthy:NoExecute"]})
        assert backend.published[-1][1].taints[0].time_added != EARLIER


async def test_driver_code_sets_and_clears_taints_at_run_time(kubelet_dir: Path) -> None:
    backend, plugin = MemoryBackend(), TaintedGpus()
    maintenance = DeviceTaint("example.com/maintenance", "NoSchedule", "firmware")
    with pytest.raises(RuntimeError, match=r"set_device_taints\(\) needs the plugin's DRA face serving"):
        plugin.set_device_taints("gpu-0", [maintenance])
    async with running(plugin, kubelet_dir, backend):
        await published(backend, {"gpu-0": [], "gpu-1": []})
        plugin.set_device_taints("gpu-0", [maintenance])
        await published(backend, {"gpu-0": ["example.com/maintenance:NoSchedule"], "gpu-1": []})
        # Its own taints, the set ones and the health taint together, each once.
        plugin.set_devices([Device("gpu-0", healthy=False, taints=[maintenance]), Device("gpu-1")])
        await published(
            backend,
            {
                "gpu-0": ["example.com/maintenance:NoSchedule", "kubedevice.io/unhealthy:NoExecute"],
                "gpu-1": [],
            },
        )
        plugin.set_device_taints("gpu-0", [])
        plugin.set_devices([Device("gpu-0"), Device("gpu-1")])
        await published(backend, {"gpu-0": [], "gpu-1": []})
        with pytest.raises(TypeError, match="expected DeviceTaint objects"):
            plugin.set_device_taints("gpu-0", ["example.com/x:NoSchedule"])  # type: ignore[list-item]
    with pytest.raises(RuntimeError):
        plugin.set_device_taints("gpu-0", [])


class Partitioned(Gpus):
    """One GPU, its counter set, two halves and the whole, as a MIG-style driver publishes them."""

    def __init__(self, counter_set: str = "gpu-0-counters") -> None:
        def uses(memory: str) -> list[DeviceCounterConsumption]:
            return [DeviceCounterConsumption(counter_set, {"memory": memory})]

        super().__init__(
            [
                Device("gpu-0-full", consumes_counters=uses("40Gi")),
                Device("gpu-0-half-0", consumes_counters=uses("20Gi")),
                Device("gpu-0-half-1", consumes_counters=uses("20Gi")),
            ]
        )

    def shared_counters(self, devices: Sequence[Device]) -> Sequence[CounterSet]:
        return [CounterSet("gpu-0-counters", {"memory": "40Gi"})]


async def test_counter_sets_are_published_with_the_devices(kubelet_dir: Path) -> None:
    backend = MemoryBackend()
    async with running(Partitioned(), kubelet_dir, backend):
        await poll_async(lambda: bool(backend.published), "published")
        assert backend.counter_sets[-1] == [CounterSet("gpu-0-counters", {"memory": "40Gi"})]
        assert [c.counter_set for d in backend.published[-1] for c in d.consumes_counters] == [
            "gpu-0-counters"
        ] * 3


def gpu0(share: str | None = None) -> AllocatedDevice:
    return AllocatedDevice("gpu", "node-1", "gpu-0", "gpu-0", share_id=share)


async def test_device_status_and_binding_conditions_are_written_to_the_claim(kubelet_dir: Path) -> None:
    backend, plugin = MemoryBackend(), Gpus()
    claim = make_claim("c1", "u1", [("gpu", "gpu-0")])
    result = claim["status"]["allocation"]["devices"]["results"][0]
    result |= {
        "bindingConditions": ["BindingConditions"],
        "bindingFailureConditions": ["BindingFailureConditions"],
    }
    claim["status"]["devices"] = [
        {"driver": "other.example.com", "pool": "p", "device": "d", "conditions": None}
    ]
    backend.add(claim)
    ref = ClaimRef("u1", "default", "c1")
    clock = [datetime(2026, 7, 24, 10, 0, 0, tzinfo=UTC)]
    async with running(plugin, kubelet_dir, backend) as server:
        assert server.dra is not None
        server.dra.hooks.status.now = lambda: clock[0]
        [allocated] = await plugin.allocated_claims()
        assert allocated.results[0].binding_conditions == ("BindingConditions",)
        assert allocated.status(allocated.results[0]) is None
        await plugin.set_device_condition(ref, allocated.results[0], "BindingConditions", message="attached")
        clock[0] += timedelta(minutes=5)
        await plugin.set_device_status(ref, gpu0(), data={"firmware": "1.2"})
        status = backend.claims[("default", "c1")]["status"]["devices"]
        assert status == [
            {"driver": "other.example.com", "pool": "p", "device": "d", "conditions": None},
            {
                "driver": DRIVER,
                "pool": "node-1",
                "device": "gpu-0",
                "conditions": [
                    {
                        "type": "BindingConditions",
                        "status": "True",
                        "lastTransitionTime": "2026-07-24T10:00:00Z",
                        "reason": "Reported",
                        "message": "attached",
                    }
                ],
                "data": {"firmware": "1.2"},
            },
        ]
        [allocated] = await plugin.allocated_claims()
        reported = allocated.status(allocated.results[0])
        assert reported is not None and [c.status for c in reported.conditions] == ["True"]
        # A condition whose status changes gets the time of the change; the others keep theirs.
        await plugin.set_device_status(
            ref,
            gpu0(),
            conditions=[DeviceCondition("Ready", "False", reason="Attaching"), *reported.conditions],
        )
        entry = backend.claims[("default", "c1")]["status"]["devices"][1]
        assert [(c["type"], c["lastTransitionTime"]) for c in entry["conditions"]] == [
            ("Ready", "2026-07-24T10:05:00Z"),
            ("BindingConditions", "2026-07-24T10:00:00Z"),
        ]
        assert entry["data"] == {"firmware": "1.2"}
        with pytest.raises(ClaimStatusError, match=r"device node-1/gpu-1 of gpu\.example\.com is not"):
            await plugin.set_device_condition(
                ref, AllocatedDevice("gpu", "node-1", "gpu-1", "gpu-1"), "Ready"
            )
        with pytest.raises(ClaimStatusError, match=r"claim default/c1 was replaced \(UID u1, not u0\)"):
            await plugin.set_device_condition(ClaimRef("u0", "default", "c1"), gpu0(), "Ready")


async def test_prepare_hands_the_hook_each_shares_id_and_consumed_capacity(kubelet_dir: Path) -> None:
    backend, plugin = MemoryBackend(), HookedGpus()
    share = "0b3c6a3e-1111-2222-3333-444455556666"
    claim = make_claim("c1", "u1", [("gpu", "gpu-0")])
    claim["status"]["allocation"]["devices"]["results"][0] |= {
        "shareID": share,
        "consumedCapacity": {"memory": "10Gi"},
    }
    backend.add(claim)
    async with running(plugin, kubelet_dir, backend):
        answer = await prepare(paths_of(kubelet_dir).dra_socket, [("u1", "c1")])
        assert answer["u1"]["error"] == ""
        [result] = plugin.prepared[0].results
        assert (result.share_id, dict(result.consumed_capacity)) == (share, {"memory": "10Gi"})


def test_published_device_carries_every_dra_field() -> None:
    from kubedevice.plugin.dra.publication import published_device

    device = Device(
        "g", allow_multiple_allocations=True, binding_conditions=["A"], binding_failure_conditions=["F"]
    )
    assert published_device(device) == PublishedDevice(
        "g",
        {},
        {},
        allow_multiple_allocations=True,
        binding_conditions=("A",),
        binding_failure_conditions=("F",),
    )
