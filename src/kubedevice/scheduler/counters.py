"""Partitionable devices in the search: the shared counters of each pool, as a running total.

Upstream's `checkAvailableCounters` starts from a pool's counter sets, subtracts what every allocated
device of the pool consumes (devices of other nodes too), adds what the devices taken so far in this search
consume, and accepts a device only while no counter of the pool is overdrawn. Here each counter is one slot
of a flat list holding what is left of it (in exact nano-units): a device's consumption is resolved to
(slot, amount) pairs once, so checking, taking and giving back a device costs one step per counter it
consumes, never a walk over the allocated devices.

A pool whose counters the allocated devices already overdraw (it was republished with less) accepts no
device that consumes counters, as upstream's check of every counter of the pool does.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from kubedevice.resource.model import DeviceID
from kubedevice.resource.slice_model import Pool, SliceDevice

__all__ = ["CounterUse", "SharedCounters"]

#: What one device consumes: (slot, amount in nano-units) pairs.
CounterUse = tuple[tuple[int, int], ...]


class SharedCounters:
    """What is left of every shared counter of the pools, while a search takes and gives back devices."""

    def __init__(self, pools: Iterable[Pool], in_use: Set[DeviceID]) -> None:
        self._slots: dict[tuple[str, str, str, str], int] = {}
        #: What is left of each counter (may be below zero when allocated devices overdraw it).
        self.left: list[int] = []
        #: Pools (driver, name) whose counters the allocated devices overdraw.
        self._overdrawn: set[tuple[str, str]] = set()
        for pool in pools:
            if pool.counter_sets:
                self._add_pool(pool, in_use)

    def _add_pool(self, pool: Pool, in_use: Set[DeviceID]) -> None:
        first = len(self.left)
        for counter_set in pool.counter_sets.values():
            for name, counter in counter_set.counters.items():
                self._slots[(pool.driver, pool.name, counter_set.name, name)] = len(self.left)
                self.left.append(counter.nanos)
        for device in (d for s in (*pool.slices, *pool.other_slices) for d in s.devices):
            if device.consumes_counters and (pool.driver, pool.name, device.name) in in_use:
                for slot, amount in self.use(pool, device):
                    self.left[slot] -= amount
        if any(v < 0 for v in self.left[first:]):
            self._overdrawn.add((pool.driver, pool.name))

    def use(self, pool: Pool, device: SliceDevice) -> CounterUse:
        """The slots and amounts `device` of `pool` consumes (a counter the pool lacks is none: such a
        pool is invalid, and its devices are never candidates)."""
        out: list[tuple[int, int]] = []
        for consumption in device.consumes_counters:
            for name, counter in consumption.counters.items():
                slot = self._slots.get((pool.driver, pool.name, consumption.counter_set, name))
                if slot is not None:
                    out.append((slot, counter.nanos))
        return tuple(out)

    def overdrawn(self, pool: Pool) -> bool:
        return (pool.driver, pool.name) in self._overdrawn

    def available(self, use: CounterUse) -> bool:
        """Whether every counter `use` names has that much left."""
        left = self.left
        return all(left[slot] >= amount for slot, amount in use)

    def take(self, use: CounterUse) -> None:
        for slot, amount in use:
            self.left[slot] -= amount

    def give_back(self, use: CounterUse) -> None:
        for slot, amount in use:
            self.left[slot] += amount
