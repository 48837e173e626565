"""The claim-info cache: the one place of truth about prepared claims, guarded per claim.

One entry per claim, keyed `<namespace>/<name>`, as in the kubelet's `claimInfoCache`. State changes happen
on the event loop between awaits, so reads need no lock; the per-claim locks order the operations that
span plugin calls (a prepare and an unprepare of one shared claim never interleave, kubelet issue
#140527), and they are always taken in sorted key order so two pods never wait on each other in a cycle.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field

from kubedevice.checkpoint.dra_codec import ClaimPiece, encode_claim_piece
from kubedevice.checkpoint.dra_model import ClaimInfoState, DRACheckpointData, DRADevice
from kubedevice.dra.types import DriverClaim, ResourceClaim


def claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclass(slots=True, eq=False)
class ClaimInfo:
    """A claim, the pods that use it and the devices each of its drivers prepared.

    `driver_state` has one key per driver of the allocation, even when that driver returned no device
    (its value then stays None, Go's nil). `prepared` is memory-only: a restored entry is unprepared.
    Change the pods and devices through the methods: they drop the entry's encoded checkpoint piece.
    """

    claim_uid: str
    claim_name: str
    namespace: str
    pod_uids: set[str] = field(default_factory=set)
    driver_state: dict[str, tuple[DRADevice, ...] | None] = field(default_factory=dict)
    prepared: bool = False
    #: The entry as the checkpoint holds it, kept until the entry changes (see checkpointing).
    encoded: ClaimPiece | None = field(default=None, repr=False)

    @classmethod
    def from_claim(cls, claim: ResourceClaim) -> ClaimInfo:
        """The entry for an allocated claim (the caller checked `claim.allocation`)."""
        drivers = claim.allocation.drivers if claim.allocation is not None else []
        return cls(claim.uid, claim.name, claim.namespace, driver_state=dict.fromkeys(drivers))

    @property
    def key(self) -> str:
        return claim_key(self.namespace, self.claim_name)

    @property
    def ref(self) -> DriverClaim:
        return DriverClaim(self.namespace, self.claim_uid, self.claim_name)

    def add_pod(self, pod_uid: str) -> None:
        self.pod_uids.add(pod_uid)
        self.encoded = None

    def remove_pod(self, pod_uid: str) -> None:
        self.pod_uids.discard(pod_uid)
        self.encoded = None

    def set_devices(self, driver: str, devices: tuple[DRADevice, ...]) -> None:
        """Replace what `driver` prepared: a retry never lists a device twice (kubelet bug B1, fixed)."""
        self.driver_state[driver] = devices or None
        self.encoded = None

    def piece(self) -> ClaimPiece:
        if self.encoded is None:
            self.encoded = encode_claim_piece(self.to_state())
        return self.encoded

    def cdi_devices(self, request: str) -> list[str]:
        """The CDI IDs of the devices serving `request` ("" is every request), drivers by name.

        A device with no request names serves every request; a subrequest (`gpu/large`, from
        firstAvailable) serves its request (`gpu`).
        """
        found: list[str] = []
        for driver in sorted(self.driver_state):
            for device in self.driver_state[driver] or ():
                if request and device.request_names and request not in _base_requests(device):
                    continue
                found.extend(device.cdi_device_ids or ())
        return found

    def devices_serving(self, request: str) -> Iterator[tuple[str, DRADevice]]:
        """(driver, device) of the devices serving `request` ("" is every request), drivers by name, as
        the kubelet picks them for a container's health: a device without request names serves every
        request, and a subrequest on either side (`gpu/large`) counts as its request (`gpu`)."""
        base = request.split("/", 1)[0]
        for driver in sorted(self.driver_state):
            for device in self.driver_state[driver] or ():
                if not request or not device.request_names or base in _base_requests(device):
                    yield driver, device

    def to_state(self) -> ClaimInfoState:
        return ClaimInfoState(
            claim_uid=self.claim_uid,
            claim_name=self.claim_name,
            namespace=self.namespace,
            pod_uids=frozenset(self.pod_uids),
            driver_state=dict(self.driver_state),
        )

    @classmethod
    def from_state(cls, state: ClaimInfoState) -> ClaimInfo:
        return cls(
            claim_uid=state.claim_uid,
            claim_name=state.claim_name,
            namespace=state.namespace,
            pod_uids=set(state.pod_uids or ()),
            driver_state=dict(state.driver_state or {}),
        )


def _base_requests(device: DRADevice) -> set[str]:
    return {name.split("/", 1)[0] for name in device.request_names or ()}


class ClaimInfoCache:
    """Entries by key, the per-claim locks, and the snapshot the checkpoint is written from."""

    def __init__(self) -> None:
        self._entries: dict[str, ClaimInfo] = {}
        #: The keys in order, kept as entries come and go: every checkpoint write lists them sorted.
        self._keys: list[str] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiters: dict[str, int] = {}
        #: pod UID -> unprepares of it whose checkpoint write has not ended (see `leaving`).
        self._leaving: dict[str, int] = {}

    def restore(self, data: DRACheckpointData) -> None:
        """Load the checkpoint's entries, every one unprepared (the flag is not stored)."""
        self._entries = {}
        for state in data.claims or ():
            info = ClaimInfo.from_state(state)
            self._entries[info.key] = info
        self._keys = sorted(self._entries)

    def get(self, namespace: str, name: str) -> ClaimInfo | None:
        return self._entries.get(claim_key(namespace, name))

    def add(self, info: ClaimInfo) -> None:
        if info.key not in self._entries:
            bisect.insort(self._keys, info.key)
        self._entries[info.key] = info

    def delete(self, namespace: str, name: str) -> None:
        key = claim_key(namespace, name)
        if self._entries.pop(key, None) is not None:
            del self._keys[bisect.bisect_left(self._keys, key)]

    def entries(self) -> list[ClaimInfo]:
        """Every entry, sorted by namespace/name."""
        entries = self._entries
        return [entries[k] for k in self._keys]

    def __len__(self) -> int:
        return len(self._entries)

    def has_pod_reference(self, pod_uid: str) -> bool:
        """Some entry lists the pod, or an unprepare that removes it has not yet written the checkpoint."""
        return pod_uid in self._leaving or any(pod_uid in info.pod_uids for info in self._entries.values())

    def claim_names_for_pod(self, pod_uid: str) -> list[str]:
        """Names of the entries that list the pod (the kubelet's claimNamesForPod)."""
        return [info.claim_name for info in self.entries() if pod_uid in info.pod_uids]

    def pods_with_claims(self) -> dict[str, tuple[str, list[str]]]:
        """pod UID -> (the namespace of its first entry, the names of its entries), for the reconcile pass."""
        found: dict[str, tuple[str, list[str]]] = {}
        for info in self.entries():
            for pod_uid in sorted(info.pod_uids):
                found.setdefault(pod_uid, (info.namespace, []))[1].append(info.claim_name)
        return found

    def pieces(self) -> list[ClaimPiece]:
        """Every entry's checkpoint piece in key order; only entries changed since the last call are
        encoded again."""
        return [info.piece() for info in self.entries()]

    @contextlib.asynccontextmanager
    async def leaving(self, pod_uid: str) -> AsyncIterator[None]:
        """Count the pod as referenced while an unprepare drops it from its entries and writes the file.

        The kubelet deletes and writes under one cache lock, which `PodMightNeedToUnprepareResources`
        also takes, so a pod is never reported free while the file on disk still lists it. Here reads
        take no lock and the entries change before the write is awaited: without this, a caller could
        forget the pod (and drop its reservations) while only memory knows it left. Asynchronous only to
        be entered beside `locked`; it never waits.
        """
        self._leaving[pod_uid] = self._leaving.get(pod_uid, 0) + 1
        try:
            yield
        finally:
            self._leaving[pod_uid] -= 1
            if self._leaving[pod_uid] == 0:
                del self._leaving[pod_uid]

    @contextlib.asynccontextmanager
    async def locked(self, keys: Iterable[str]) -> AsyncIterator[None]:
        """Hold the locks of these claims, taken in sorted order; each lock is dropped once unused."""
        ordered = sorted(set(keys))
        held: list[str] = []
        try:
            for key in ordered:
                lock = self._locks.setdefault(key, asyncio.Lock())
                self._waiters[key] = self._waiters.get(key, 0) + 1
                try:
                    await lock.acquire()
                except BaseException:
                    self._release_waiter(key)
                    raise
                held.append(key)
            yield
        finally:
            for key in reversed(held):
                self._locks[key].release()
                self._release_waiter(key)

    def _release_waiter(self, key: str) -> None:
        self._waiters[key] -= 1
        if self._waiters[key] == 0:
            del self._waiters[key]
            del self._locks[key]
