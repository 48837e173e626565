"""The scheduler's `GatherPools`: ResourceSlices gathered into the pools one node's allocation can use.

A pool counts only in its highest generation, and only when every slice of that generation
(`resourceSliceCount`) is present; otherwise it is incomplete and its devices wait. Slices for another node
(by name, or by a `nodeSelector` that does not match its labels) are ignored with a warning, a slice whose
name is already taken is reported and ignored, and a slice using a feature kubedevice leaves out is reported
once and its devices are marked so they are never candidates. Slices keep the order given (the published
order), devices their `spec.devices` order (never sorted); pools are ordered by (driver, pool name) compared
as bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubedevice.resource.model import Pool, ResourceSliceDocument

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
    devices marked). `pools`: the pools at their highest generation, by (driver, pool name) as bytes;
    an incomplete or invalid pool is listed too, flagged. `ignored`: slices given but not used (another
    node's, a name already used), each with its report. `errors`: slices
    (and, from a folder, files) ignored because they are bad; `warnings`: slices ignored for another
    node, left-out features, incomplete or invalid pools.
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
    pools. A slice serves the node when its `nodeName` is the node's, it has `allNodes`, or its
    `nodeSelector` matches the node's name and labels.

    A slice's name belongs to the first slice that has it; a later one is an error naming where the
    first was read (`meta.source`).
    """
    labels = node_labels or {}
    kept: list[ResourceSliceDocument] = []
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
        if s.node_selector is not None and not s.node_selector.matches(node_name, labels):
            shown = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"
            message = f'its spec.nodeSelector does not match node "{node_name}" (labels: {shown}); ignored'
            warnings.append(SliceReport(source, name, f"ResourceSlice {name}: {message}"))
            ignored.append(s)
            continue
        if not s.all_nodes and s.node_name and s.node_name != node_name:
            message = f'published for node "{s.node_name}", this node is "{node_name}"; ignored'
            warnings.append(SliceReport(source, name, f"ResourceSlice {name}: {message}"))
            ignored.append(s)
            continue
        feature = s.unsupported or next((d.unsupported for d in s.devices if d.unsupported), None)
        if feature is not None:
            text = f"unsupported by kubedevice: {feature} (ResourceSlice {name})"
            warnings.append(SliceReport(source, name, text))
        kept.append(s)
    pools = _pools(kept)
    for p in pools:
        where = p.slices[0].meta.source if p.slices else ""
        if p.invalid is not None:
            warnings.append(SliceReport(where, "", f"pool {p.driver}/{p.name}: {p.invalid}"))
        elif not p.complete:
            want = max(s.slice_count for s in p.slices)
            text = (
                f"pool {p.driver}/{p.name}: {len(p.slices)} of {want} slice(s) of generation {p.generation} "
                "published; its devices wait for the others"
            )
            warnings.append(SliceReport(where, "", text))
    return SliceScan(tuple(kept), pools, tuple(errors), tuple(warnings), tuple(ignored))


def _pools(slices: list[ResourceSliceDocument]) -> tuple[Pool, ...]:
    grouped: dict[tuple[str, str], list[ResourceSliceDocument]] = {}
    for s in slices:
        grouped.setdefault((s.driver, s.pool), []).append(s)
    pools: list[Pool] = []
    for (driver, name), members in grouped.items():
        generation = max(s.generation for s in members)
        current = tuple(s for s in members if s.generation == generation)
        complete = all(s.slice_count == len(current) for s in current)
        seen: set[str] = set()
        invalid = None
        for d in (d for s in current for d in s.devices):
            if d.name in seen:
                invalid = f"device {d.name} is published twice in generation {generation}"
                break
            seen.add(d.name)
        pools.append(Pool(driver, name, generation, current, complete, invalid))
    pools.sort(key=lambda p: (p.driver.encode(), p.name.encode()))
    return tuple(pools)
