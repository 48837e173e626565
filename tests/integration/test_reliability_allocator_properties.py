"""Properties of allocation over random devices, health, topology, plugin preferences and pods (hypothesis).

Each example runs a real device manager and a real plugin over gRPC: the allocator's rules are only
meaningful together with the manager's bookkeeping (healthy, allocated, in flight). What must hold for
every allocation: exactly the requested count, only healthy devices, never a device another container
holds, an init container's devices reused first (must_include), and NUMA-aligned when enough aligned
devices are free. Whatever the plugin prefers (strangers, unhealthy or taken IDs, too many) changes none
of this.
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.manager import AdmissionError, Container, DeviceManager, Pod, TopologyHint
from kubedevice.topology.scope import HintStore
from tests.integration.fakeplugin import FakePlugin, device
from tests.waiting import short_tempdir

R = "example.com/prop"


@dataclass(frozen=True)
class Request:
    init: int
    app: int
    affinity: frozenset[int] | None


DEVICES = st.lists(
    st.tuples(st.booleans(), st.lists(st.integers(0, 2), max_size=2, unique=True)),
    min_size=1,
    max_size=10,
)
REQUESTS = st.lists(
    st.builds(
        Request,
        init=st.integers(0, 3),
        app=st.integers(1, 4),
        affinity=st.none() | st.frozensets(st.integers(0, 2), min_size=1, max_size=2),
    ),
    min_size=1,
    max_size=6,
)
PREFERENCES = st.none() | st.lists(st.sampled_from([f"d{i}" for i in range(12)] + ["ghost"]), max_size=6)


async def _run(
    devices: list[tuple[bool, list[int]]], requests: list[Request], preference: list[str] | None
) -> None:
    root = short_tempdir()
    listed = [device(f"d{i}", "Healthy" if ok else "Unhealthy", numa) for i, (ok, numa) in enumerate(devices)]
    healthy = {d.ID for d in listed if d.health == "Healthy"}
    nodes = {d.ID: {n.ID for n in d.topology.nodes} for d in listed}
    offered: list[dp.ContainerPreferredAllocationRequest] = []

    async def prefer(request: dp.PreferredAllocationRequest) -> dp.PreferredAllocationResponse:
        offered.extend(request.container_requests)
        ids = preference if preference is not None else []
        return dp.PreferredAllocationResponse(
            container_responses=[dp.ContainerPreferredAllocationResponse(deviceIDs=ids)]
        )

    options = dp.DevicePluginOptions(get_preferred_allocation_available=preference is not None)
    plugin = FakePlugin(root / "dp" / "prop.sock", R, listed, options=options, preferred=prefer)
    store = HintStore()
    manager = DeviceManager(root / "dp", affinity=store)
    await manager.start()
    try:
        await plugin.start()
        await plugin.register(manager.socket_path)
        while manager.get_capacity()[0].get(R) != len(listed):
            await manager.wait_for_change(manager.version)
        held: dict[str, set[str]] = {}  # "pod/container" -> devices
        for i, req in enumerate(requests):
            hint = TopologyHint.of(tuple(req.affinity) if req.affinity else None, True)
            for name in ("init", "app"):
                store.set_hint(f"pod{i}", name, hint)
            init = [Container("init", {R: req.init})] if req.init else []
            pod = Pod(
                uid=f"pod{i}",
                namespace="default",
                name=f"pod{i}",
                init_containers=init,
                containers=[Container("app", {R: req.app})],
            )
            taken = set().union(*held.values()) if held else set()
            for container in [*pod.init_containers, *pod.containers]:
                free = healthy - taken
                aligned_free = {d for d in free if req.affinity and nodes[d] & req.affinity}
                offered.clear()
                try:
                    await manager.allocate(pod, container)
                except AdmissionError as err:
                    assert str(err).startswith(
                        ("requested number of devices unavailable", "no healthy devices present")
                    ), str(err)
                    assert manager.get_devices(pod.uid, container.name) is None
                    break
                got = set((manager.get_devices(pod.uid, container.name) or {}).get(R, {}))
                want = container.limits[R]
                assert len(got) == want, (container.name, got, want)
                assert got <= healthy, f"unhealthy devices allocated: {got - healthy}"
                reused = held.get(f"{pod.uid}/init", set()) if container.name == "app" else set()
                assert got.isdisjoint(taken - reused), f"devices held by another container: {got & taken}"
                if reused:
                    # The init container's devices are reused first (they are must_include for the plugin).
                    assert len(got & reused) == min(want, len(reused))
                    for request in offered:
                        assert set(request.must_include_deviceIDs) <= got
                if req.affinity and not reused and len(aligned_free) >= want:
                    assert got <= aligned_free, (
                        f"not NUMA-aligned: {got} with {len(aligned_free)} aligned free"
                    )
                held[f"{pod.uid}/{container.name}"] = got
                taken |= got
    finally:
        await plugin.stop()
        await manager.stop()
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devices=DEVICES, requests=REQUESTS, preference=PREFERENCES)
def test_every_allocation_keeps_the_rules(
    devices: list[tuple[bool, list[int]]], requests: list[Request], preference: list[str] | None
) -> None:
    asyncio.run(_run(devices, requests, preference))
