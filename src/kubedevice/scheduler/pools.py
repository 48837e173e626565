"""The scheduler's `GatherPools` (`pools_experimental.go`): ResourceSlices gathered into the pools one
node's allocation can use.

A slice serves the node when its `nodeName` is the node's, it has `allNodes`, its `nodeSelector` matches the
node's name and labels, or (`perDeviceNodeSelection`) one of its devices serves the node. A pool counts in
the highest generation of the slices that serve the node, and only when every slice of that generation
(`resourceSliceCount`) is present; when the node's own slices are not all of it, the pool's slices for
other nodes count too (a pool may span nodes), and a slice for another node with a higher generation means
the pool is being replaced: it is left out (upstream's `checkSlicesInPool`). A pool is
invalid when a device name repeats, a counter set name repeats, or a device consumes from a counter set (or
a counter) the pool does not have.

Slices for another node are reported with a warning (their devices are never candidates, but their
allocated devices still use up the pool's shared counters), a slice whose name is already taken is
reported and ignored, and a slice using a feature kubedevice leaves out is reported once and its devices
are marked so they are never candidates. Within a pool, slices are taken by name and devices in their
`spec.devices` order (never sorted); pools are ordered by (driver, pool name) compared as bytes, those with
a device that has binding conditions last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubedevice.resource.counters import CounterSet
from kubedevice.resource.slice_model import Pool, ResourceSliceDocument

__all__ = ["SliceReport", "SliceScan", "gather_pools"]


@dataclass(frozen=True, slots=True)
class SliceReport:
    """A problem with one slice (`slice` its name) or a whole file (`slice` "")."""

    #: Where the slice was read (its `meta.source`), or the file at fault.
    file: str
    slice: str
    message: str


@dataclass(frozen=True, slots=True)
class SliceScan:
    """What a set of slices publishes for one node.

    `slices`: every slice kept, in the order given (those with left-out features included, their
    devices marked). `pools`: the pools at their highest generation, by (driver, pool name) as bytes
    (pools with binding conditions last); an incomplete or invalid pool is listed too, flagged.
    `ignored`: slices given but not used (another node's, a name already used), each with its report.
    `errors`: slices (and, from a folder, files) ignored because they are bad; `warnings`: slices ignored
    for another node, left-out features, incomplete or invalid pools.
    """

    slices: tuple[ResourceSliceDocument, ...] = ()
    pools: tuple[Pool, ...] = ()
    errors: tuple[SliceReport, ...] = ()
    warnings: tuple[SliceReport, ...] = ()
    ignored: tuple[ResourceSliceDocument, ...] = ()

    def pool(self, driver: str, name: str) -> Pool | None:
        return next((p for p in self.pools if p.driver == driver and p.name == name), None)


def gather_pools(
    slices: Iterable[ResourceSliceDocument], node_name: str, node_labels: Mapping[str, str] | None = None
) -> SliceScan:
    """The slices (in published order) that node `node_name` (with `node_labels`) may use, gathered into
    pools.

    A slice's name belongs to the first slice that has it; a later one is an error naming where the
    first was read (`meta.source`).
    """
    labels = node_labels or {}
    kept: list[ResourceSliceDocument] = []
    others: list[ResourceSliceDocument] = []
    ignored: list[ResourceSliceDocument] = []
    errors: list[SliceReport] = []
    warnings: list[SliceReport] = []
    owner: dict[str, str] = {}
    for s in slices:
        name, source = s.meta.name, s.meta.source
        if name in owner:
            where = "appears twice" if owner[name] == source else f"is already defined by {owner[name]}"
            errors.append(SliceReport(source, name, f"ResourceSlice {name} {where}"))
            ignored.append(s)
            continue
        owner[name] = source
        elsewhere = _not_for_node(s, node_name, labels)
        if elsewhere is not None:
            others.append(s)
            if s.devices:  # a slice of counter sets alone has nothing to warn about
                warnings.append(SliceReport(source, name, f"ResourceSlice {name}: {elsewhere}; ignored"))
                ignored.append(s)
            continue
        feature = s.unsupported or next((d.unsupported for d in s.devices if d.unsupported), None)
        if feature is not None:
            text = f"unsupported by kubedevice: {feature} (ResourceSlice {name})"
            warnings.append(SliceReport(source, name, text))
        kept.append(s)
    pools = _pools(kept, others)
    for p in pools:
        where = p.slices[0].meta.source if p.slices else ""
        if p.invalid is not None:
            warnings.append(SliceReport(where, "", f"pool {p.driver}/{p.name}: {p.invalid}"))
        elif not p.complete:
            want = max(s.slice_count for s in p.slices)
            have = len(p.slices) + len(p.other_slices)
            text = (
                f"pool {p.driver}/{p.name}: {have} of {want} slice(s) of generation {p.generation} "
                "published; its devices wait for the others"
            )
            warnings.append(SliceReport(where, "", text))
    return SliceScan(tuple(kept), pools, tuple(errors), tuple(warnings), tuple(ignored))


def _not_for_node(s: ResourceSliceDocument, node_name: str, labels: Mapping[str, str]) -> str | None:
    """Why slice `s` does not serve the node, or None when it does."""
    if s.node_selector is not None:
        if s.node_selector.matches(node_name, labels):
            return None
        shown = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"
        return f'its spec.nodeSelector does not match node "{node_name}" (labels: {shown})'
    if s.per_device_node_selection:
        if any(d.serves(node_name, labels) for d in s.devices):
            return None
        return f'none of its devices is for node "{node_name}"'
    if not s.all_nodes and s.node_name and s.node_name != node_name:
        return f'published for node "{s.node_name}", this node is "{node_name}"'
    return None


def _pools(kept: list[ResourceSliceDocument], others: list[ResourceSliceDocument]) -> tuple[Pool, ...]:
    grouped: dict[tuple[str, str], list[ResourceSliceDocument]] = {}
    for s in kept:
        grouped.setdefault((s.driver, s.pool), []).append(s)
    elsewhere: dict[tuple[str, str], list[ResourceSliceDocument]] = {}
    for s in others:
        elsewhere.setdefault((s.driver, s.pool), []).append(s)
    pools: list[Pool] = []
    for (driver, name), members in grouped.items():
        generation = max(s.generation for s in members)
        current = sorted((s for s in members if s.generation == generation), key=lambda s: s.meta.name)
        other: tuple[ResourceSliceDocument, ...] = ()
        if not all(s.slice_count == len(current) for s in current):
            # Not complete with this node's slices alone: the pool may span nodes (`checkSlicesInPool`).
            rest = elsewhere.get((driver, name), [])
            if any(s.generation > generation for s in rest):
                continue  # being replaced by a generation published for other nodes only
            other = tuple(sorted((s for s in rest if s.generation == generation), key=lambda s: s.meta.name))
        complete = all(s.slice_count == len(current) + len(other) for s in current)
        pool = Pool(driver, name, generation, tuple(current), complete, other_slices=other)
        pools.append(_checked(pool) if complete else pool)
    pools.sort(key=lambda p: (_has_binding_conditions(p), p.driver.encode(), p.name.encode()))
    return tuple(pools)


def _checked(pool: Pool) -> Pool:
    """The pool with its counter sets, or flagged invalid with upstream's reason (`buildPool`)."""
    seen: set[str] = set()
    for d in (d for s in pool.slices for d in s.devices):
        if d.name in seen:
            return _invalid(pool, f"device {d.name} is published twice in generation {pool.generation}")
        seen.add(d.name)
    counter_sets: dict[str, CounterSet] = {}
    for counter_set in (c for s in (*pool.slices, *pool.other_slices) for c in s.shared_counters):
        if counter_set.name in counter_sets:
            return _invalid(pool, f"duplicate counter set name {counter_set.name}")
        counter_sets[counter_set.name] = counter_set
    for d in (d for s in (*pool.slices, *pool.other_slices) for d in s.devices):
        for consumption in d.consumes_counters:
            found = counter_sets.get(consumption.counter_set)
            if found is None:
                return _invalid(pool, f"counter set {consumption.counter_set} not found")
            for counter in consumption.counters:
                if counter not in found.counters:
                    return _invalid(pool, f"counter {counter} not found in counter set {found.name}")
    return Pool(
        pool.driver,
        pool.name,
        pool.generation,
        pool.slices,
        pool.complete,
        counter_sets=counter_sets,
        other_slices=pool.other_slices,
    )


def _invalid(pool: Pool, why: str) -> Pool:
    return Pool(pool.driver, pool.name, pool.generation, pool.slices, pool.complete, why)


def _has_binding_conditions(pool: Pool) -> bool:
    """Pools with binding conditions come last: a device that needs no binding step is preferred."""
    return any(d.binding_conditions for s in pool.slices for d in s.devices)
