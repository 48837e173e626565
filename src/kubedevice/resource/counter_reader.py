"""Reading a slice's `sharedCounters` and a device's `consumesCounters`, checked as the API server checks
them (`validateCounterSet`, `validateDeviceCounterConsumption`, upstream's limits from types.go), every
refusal naming the field."""

from __future__ import annotations

from typing import Any

from kubedevice.resource.counters import Counter, CounterSet, DeviceCounterConsumption
from kubedevice.resource.fields import Fields, shown
from kubedevice.resource.names import is_dns_label
from kubedevice.resource.quantity import QuantityTooLargeError, quantity_nanos

__all__ = [
    "MAX_CONSUMPTIONS_PER_DEVICE",
    "MAX_COUNTERS",
    "MAX_COUNTER_SETS",
    "read_consumption",
    "read_counter_sets",
]

#: `ResourceSliceMaxCounterSets`, `ResourceSliceMaxCountersPerCounterSet` (also per consumption) and
#: `ResourceSliceMaxDeviceCounterConsumptionsPerDevice`.
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMPTIONS_PER_DEVICE = 2


def read_counter_sets(f: Fields, value: Any, path: str) -> tuple[CounterSet, ...]:
    out: list[CounterSet] = []
    for i, raw in enumerate(f.items(value, path, at_most=MAX_COUNTER_SETS)):
        at = f"{path}[{i}]"
        entry = f.mapping(raw, at)
        name = f.dns_label(entry.get("name"), f"{at}.name")
        if any(s.name == name for s in out):
            raise f.error(f"{at}.name", f"{name!r} is used by another counter set")
        out.append(CounterSet(name, _counters(f, entry.get("counters"), f"{at}.counters")))
    return tuple(out)


def read_consumption(f: Fields, value: Any, path: str) -> tuple[DeviceCounterConsumption, ...]:
    out: list[DeviceCounterConsumption] = []
    for i, raw in enumerate(f.items(value, path, at_most=MAX_CONSUMPTIONS_PER_DEVICE)):
        at = f"{path}[{i}]"
        entry = f.mapping(raw, at)
        name = f.dns_label(entry.get("counterSet"), f"{at}.counterSet")
        if any(c.counter_set == name for c in out):
            raise f.error(f"{at}.counterSet", f"{name!r} is named by another entry (one per counter set)")
        out.append(DeviceCounterConsumption(name, _counters(f, entry.get("counters"), f"{at}.counters")))
    return tuple(out)


def _counters(f: Fields, value: Any, path: str) -> dict[str, Counter]:
    raw = f.mapping(value, path)
    if not raw:
        raise f.error(path, "is required (at least one counter)")
    if len(raw) > MAX_COUNTERS:
        raise f.error(path, f"must have at most {MAX_COUNTERS} counters, has {len(raw)}")
    out: dict[str, Counter] = {}
    for key, item in raw.items():
        if not isinstance(key, str) or not is_dns_label(key):
            raise f.error(
                f"{path}[{key}]", "is not a DNS label (lower-case letters, digits and '-', at most 63)"
            )
        entry = f.mapping(item, f"{path}[{key}]")
        quantity = entry.get("value")
        if quantity is None:
            raise f.error(f"{path}[{key}].value", "is required")
        try:
            nanos = quantity_nanos(quantity)
        except QuantityTooLargeError:
            raise f.error(
                f"{path}[{key}].value", f"{shown(str(quantity))} is too large (at most 2^63-1)"
            ) from None
        except ValueError:
            what = f"{shown(str(quantity))} is not a quantity (e.g. 16Gi, 2, 500m)"
            raise f.error(f"{path}[{key}].value", what) from None
        out[key] = Counter(str(quantity), nanos)
    return out
