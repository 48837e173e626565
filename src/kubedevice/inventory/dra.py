"""The DRA devices of a PodResources answer (`dynamic_resources` per container), each counted once.

The kubelet's answer repeats itself in two ways, and kubedevice's own readers undo both: a container that
names one claim twice (two requests) gets two identical entries, and within one claim the `cdi_devices`
list is shared by the devices of one driver and keeps growing, so the k-th device of a driver carries the
CDI IDs of devices 1..k. Here each (container, claim, driver, pool, device) is one HeldClaimDevice and
each CDI ID belongs to the first device of its claim and driver that lists it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kubedevice.api.podresources.v1 import api_pb2 as pr


@dataclass(frozen=True, slots=True)
class HeldClaimDevice:
    """One device of one prepared ResourceClaim, used by one container."""

    namespace: str
    pod: str
    container: str
    #: The claim's name; a claim is always in its pod's namespace.
    claim: str
    driver: str
    pool: str
    device: str
    #: The CDI IDs this device adds to its claim and driver (the kubelet's repeats taken out).
    cdi_devices: tuple[str, ...]


def claim_devices(pod_resources: Iterable[pr.PodResources]) -> tuple[HeldClaimDevice, ...]:
    """One HeldClaimDevice per device of each claim of each container, in the order List gave them."""
    out: list[HeldClaimDevice] = []
    names: dict[str, str] = {}
    for p in pod_resources:
        namespace = names.setdefault(p.namespace, p.namespace)
        for c in p.containers:
            if not c.dynamic_resources:
                continue
            container = names.setdefault(c.name, c.name)
            seen: set[tuple[str, str, str, str]] = set()
            for dynamic in c.dynamic_resources:
                claim = names.setdefault(dynamic.claim_name, dynamic.claim_name)
                # Per driver of this claim: the CDI IDs its earlier devices listed.
                listed: dict[str, set[str]] = {}
                for r in dynamic.claim_resources:
                    driver = names.setdefault(r.driver_name, r.driver_name)
                    ids = listed.setdefault(driver, set())
                    own = tuple(cdi.name for cdi in r.cdi_devices if cdi.name not in ids)
                    ids.update(own)
                    key = (claim, driver, r.pool_name, r.device_name)
                    if key in seen:  # the same claim named again by another request of the container
                        continue
                    seen.add(key)
                    pool = names.setdefault(r.pool_name, r.pool_name)
                    out.append(
                        HeldClaimDevice(namespace, p.name, container, claim, driver, pool, r.device_name, own)
                    )
    return tuple(out)
