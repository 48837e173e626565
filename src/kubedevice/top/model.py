"""What one `top` frame shows, built from the node daemon's status API or from a bare PodResources socket."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubedevice.inventory import PodResourcesView, natural_key


@dataclass(frozen=True, slots=True)
class DeviceCell:
    device: str
    numa_nodes: tuple[int, ...]
    #: None: not known (a held device GetAllocatableResources does not list: unhealthy, or plugin gone).
    healthy: bool | None
    #: "namespace/name" of the pods whose containers hold it (one, unless the node is confused).
    holders: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResourceRow:
    resource: str
    devices: tuple[DeviceCell, ...]
    #: Said after the counts, e.g. that the resource's plugin is gone.
    note: str | None = None
    #: A DRA driver's devices (`resource` is the driver, each device `<pool>/<device>`), not a resource's.
    dra: bool = False


@dataclass(frozen=True, slots=True)
class HeldBy:
    """The devices of one container."""

    pod: str  # namespace/name
    container: str
    resource: str
    devices: tuple[str, ...]
    #: The DRA claim the devices come through (`resource` is then its driver); None for a device plugin's.
    claim: str | None = None


@dataclass(frozen=True, slots=True)
class TopView:
    #: One line saying where the data comes from and how much it can tell.
    source: str
    resources: tuple[ResourceRow, ...]
    held: tuple[HeldBy, ...]
    #: False for a bare PodResources socket: free unhealthy devices are invisible there.
    health_known: bool

    def pods(self) -> list[str]:
        """Pods holding devices, numbered in this order in the frame."""
        return sorted({h.pod for h in self.held}, key=natural_key)


def _holders(held: Iterable[HeldBy]) -> dict[tuple[str, str], tuple[str, ...]]:
    out: dict[tuple[str, str], set[str]] = {}
    for h in held:
        for d in h.devices:
            out.setdefault((h.resource, d), set()).add(h.pod)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _sorted_cells(cells: Iterable[DeviceCell]) -> tuple[DeviceCell, ...]:
    return tuple(sorted(cells, key=lambda c: natural_key(c.device)))


def from_status(source: str, node: dict[str, Any], pods: dict[str, Any]) -> TopView:
    """The node daemon's `/node` and `/pods` answers: health, topology and holders of every device.

    Only pods hold devices: the manifests that could not be used (`manifestErrors`) hold nothing.
    """
    held: list[HeldBy] = []
    for pod in pods["pods"]:
        name = f"{pod['namespace']}/{pod['name']}"
        for c in pod["containers"]:
            held.extend(HeldBy(name, c["name"], r, tuple(ids)) for r, ids in c["devices"].items() if ids)
            held.extend(_claim_holders(name, c))
    holders = _holders(held)
    resources = []
    for resource, info in sorted(node["resources"].items()):
        numa = info.get("numaNodes", {})
        cells = [
            DeviceCell(d, tuple(numa.get(d, ())), healthy, holders.get((resource, d), ()))
            for healthy, ids in ((True, info["healthy"]), (False, info["unhealthy"]))
            for d in ids
        ]
        stopped = info.get("stoppedSeconds")
        note = (
            f"plugin gone for {stopped:.0f}s: its devices count as unhealthy"
            if info.get("endpoint") == "stopped" and stopped is not None
            else None
        )
        resources.append(ResourceRow(resource, _sorted_cells(cells), note))
    resources.extend(_dra_drivers(node, holders))
    return TopView(source, tuple(resources), tuple(held), health_known=True)


def _claim_holders(pod: str, container: dict[str, Any]) -> list[HeldBy]:
    """A container's DRA devices, one HeldBy per claim and driver (`/pods` lists each device once)."""
    out: dict[tuple[str, str], list[str]] = {}
    for claim in container.get("claims", ()):
        for d in claim["devices"]:
            out.setdefault((claim["claim"], d["driver"]), []).append(f"{d['pool']}/{d['device']}")
    return [
        HeldBy(pod, container["name"], driver, tuple(ids), claim=claim.partition("/")[2])
        for (claim, driver), ids in out.items()
    ]


def _dra_drivers(node: dict[str, Any], holders: dict[tuple[str, str], tuple[str, ...]]) -> list[ResourceRow]:
    """Each DRA driver's published devices (`/node`), held or free; DRA has no device health to show."""
    drivers = {**node.get("unregisteredSliceDrivers", {}), **node.get("draDrivers", {})}
    out = []
    for driver, info in sorted(drivers.items()):
        devices = set(info.get("devices", ())) | {d for r, d in holders if r == driver}
        cells = (DeviceCell(d, (), True, holders.get((driver, d), ())) for d in devices)
        note = None if driver in node.get("draDrivers", {}) else "DRA driver not registered"
        out.append(ResourceRow(driver, _sorted_cells(cells), note, dra=True))
    return out


def from_podresources(source: str, view: PodResourcesView) -> TopView:
    """A PodResources socket: allocatable devices are healthy; held ones outside it are of unknown health."""
    per_container: dict[tuple[str, str, str], list[str]] = {}
    allocatable = view.allocatable if view.allocatable is not None else {}
    topology: dict[str, dict[str, tuple[int, ...]]] = {r: dict(ids) for r, ids in allocatable.items()}
    for h in view.held:
        per_container.setdefault((f"{h.namespace}/{h.pod}", h.container, h.resource), []).append(h.device)
        topology.setdefault(h.resource, {}).setdefault(h.device, h.numa_nodes)
    held = [HeldBy(p, c, r, tuple(sorted(ids, key=natural_key))) for (p, c, r), ids in per_container.items()]
    holders = _holders(held)
    resources = tuple(
        ResourceRow(
            resource,
            _sorted_cells(
                DeviceCell(
                    d,
                    nodes,
                    True if d in allocatable.get(resource, {}) else None,
                    holders.get((resource, d), ()),
                )
                for d, nodes in ids.items()
            ),
        )
        for resource, ids in sorted(topology.items())
    )
    claim_held = _podresources_claims(view)
    dra_holders = _holders(claim_held)
    drivers = sorted({h.resource for h in claim_held})
    dra = tuple(
        ResourceRow(
            driver,
            _sorted_cells(
                DeviceCell(d, (), True, pods) for (r, d), pods in dra_holders.items() if r == driver
            ),
            "PodResources lists the DRA devices claims hold, not the free ones",
            dra=True,
        )
        for driver in drivers
    )
    if view.allocatable is None:
        source += " (no GetAllocatableResources: held devices only)"
    return TopView(source, resources + dra, tuple(held + claim_held), health_known=False)


def _podresources_claims(view: PodResourcesView) -> list[HeldBy]:
    """The containers' DRA devices, one HeldBy per claim and driver."""
    per_claim: dict[tuple[str, str, str, str], list[str]] = {}
    for d in view.claim_devices:
        key = (f"{d.namespace}/{d.pod}", d.container, d.driver, d.claim)
        per_claim.setdefault(key, []).append(f"{d.pool}/{d.device}")
    return [
        HeldBy(p, c, driver, tuple(sorted(ids, key=natural_key)), claim=claim)
        for (p, c, driver, claim), ids in per_claim.items()
    ]
