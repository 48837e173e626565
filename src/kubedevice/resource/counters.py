"""Partitionable devices' shared counters (`resource.k8s.io/v1` CounterSet, DeviceCounterConsumption):
a pool publishes counter sets, and each device names the counters it uses up while it is allocated.

Amounts are kept as exact integers of nano-units (`kubedevice.resource.quantity.quantity_nanos`), so the
allocator adds and compares them without rounding; the text as published is kept beside for display.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Counter", "CounterSet", "DeviceCounterConsumption"]


@dataclass(frozen=True, slots=True)
class Counter:
    #: The quantity as published (`40Gi`).
    text: str
    #: Its exact value in nano-units.
    nanos: int


@dataclass(frozen=True, slots=True)
class CounterSet:
    """A named set of counters a pool offers; devices of the pool consume from it."""

    name: str
    counters: Mapping[str, Counter] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceCounterConsumption:
    """What one device uses up of one counter set while it is allocated."""

    counter_set: str
    counters: Mapping[str, Counter] = field(default_factory=dict)
