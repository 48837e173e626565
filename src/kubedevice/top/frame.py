"""One `top` frame as rich renderables: per resource, its devices by NUMA node, then the pods holding them.

A device is one cell: the number of the pod holding it, `·` when free, `✗` when unhealthy, `!n` when pod n
holds an unhealthy device, `?n` when PodResources cannot tell its health. Sixteen cells per NUMA row fit in
80 columns; a resource with more devices gets one summary line per NUMA node instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kubedevice.console import shown
from kubedevice.inventory.model import numa_label
from kubedevice.logs import escaped
from kubedevice.top.model import DeviceCell, ResourceRow, TopView
from kubedevice.wording import counted

#: Beyond this many devices a resource is summarised per NUMA node.
MAX_CELLS = 16
#: Unhealthy device IDs named under a resource; beyond, a count (IDs are often 40-character UUIDs).
MAX_NAMED = 6
_STYLES = {"held": "bold green", "free": "dim", "unhealthy": "bold red", "unknown": "bold yellow"}


@dataclass(frozen=True, slots=True)
class _Counts:
    """A partition of devices: held (some of them unhealthy or of unknown health), free, unhealthy free."""

    held: int = 0
    held_unhealthy: int = 0
    held_unknown: int = 0
    free: int = 0
    unhealthy: int = 0

    @classmethod
    def of(cls, cells: Iterable[DeviceCell]) -> _Counts:
        held = held_unhealthy = held_unknown = free = unhealthy = 0
        for c in cells:
            if c.holders:
                held += 1
                held_unhealthy += c.healthy is False
                held_unknown += c.healthy is None
            elif c.healthy:
                free += 1
            else:
                unhealthy += 1
        return cls(held, held_unhealthy, held_unknown, free, unhealthy)

    def describe(self, total: int, health_known: bool = True) -> str:
        notes = [
            f"{n} {what}"
            for n, what in ((self.held_unhealthy, "unhealthy"), (self.held_unknown, "health unknown"))
            if n
        ]
        held = f"{self.held} held" + (f" ({', '.join(notes)})" if notes else "")
        if not health_known:  # free unhealthy devices are not listed: no count to give
            return f"{counted(total, 'device')} listed: {held}, {self.free} free"
        return f"{counted(total, 'device')}: {held}, {self.free} free, {self.unhealthy} unhealthy"


def _state(cell: DeviceCell) -> str:
    if cell.healthy is None:
        return "unknown"
    if not cell.healthy:
        return "unhealthy"
    return "held" if cell.holders else "free"


def _mark(cell: DeviceCell, numbers: dict[str, int]) -> str:
    key = ",".join(str(numbers[p]) for p in cell.holders)
    if cell.healthy is None:
        return f"?{key}"
    if not cell.healthy:
        return f"!{key}" if key else "✗"
    return key or "·"


def _groups(devices: Iterable[DeviceCell]) -> list[tuple[str, list[DeviceCell]]]:
    groups: dict[tuple[int, ...], list[DeviceCell]] = {}
    for d in devices:
        groups.setdefault(d.numa_nodes, []).append(d)
    ordered = sorted(groups.items(), key=lambda kv: (not kv[0], kv[0]))  # devices without topology last
    return [(f"NUMA {numa_label(nodes)}" if nodes else "no NUMA", cells) for nodes, cells in ordered]


def _resource(r: ResourceRow, numbers: dict[str, int], health_known: bool) -> RenderableType:
    counts = _Counts.of(r.devices).describe(len(r.devices), health_known)
    # Names from plugins, printed as Text (no markup): only their control characters escaped.
    name = escaped(f"{r.resource} (DRA)" if r.dra else r.resource)
    lines = [Text.assemble((name, "bold"), "  ", counts)]
    if r.note is not None:
        lines.append(Text(f"  {r.note}", style="bold red"))
    if not r.devices:
        lines.append(Text("  no devices reported", style="dim"))
    groups = _groups(r.devices)
    label_width = max((len(label) for label, _ in groups), default=0)
    marks = {d.device: _mark(d, numbers) for d in r.devices}
    cell_width = max((len(m) for m in marks.values()), default=1) + 1
    cell_width = max(cell_width, 4)
    for label, cells in groups:
        line = Text(f"  {label:<{label_width}}  ")
        if len(r.devices) > MAX_CELLS:
            line.append(_Counts.of(cells).describe(len(cells), health_known))
        else:
            for i, c in enumerate(cells):
                line.append(" " if i else "")
                line.append(f"{marks[c.device]:>{cell_width - 1}}", style=_STYLES[_state(c)])
        lines.append(line)
    unhealthy = [d.device for d in r.devices if d.healthy is False]
    if unhealthy:
        named = escaped(", ".join(unhealthy[:MAX_NAMED]))
        more = f", and {len(unhealthy) - MAX_NAMED} more" if len(unhealthy) > MAX_NAMED else ""
        lines.append(Text(f"  unhealthy: {named}{more}", style="red"))
    return Group(*lines)


def _pods(view: TopView, numbers: dict[str, int]) -> RenderableType:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("pod", no_wrap=True, max_width=30)
    table.add_column("container", no_wrap=True, max_width=16)
    table.add_column("devices")
    rows = sorted(view.held, key=lambda h: (numbers[h.pod], h.container, h.claim is not None, h.resource))
    previous = None
    for h in rows:
        first = h.pod != previous
        previous = h.pod
        table.add_row(
            str(numbers[h.pod]) if first else "",
            shown(h.pod) if first else "",
            shown(h.container),
            shown(f"{h.resource}: {','.join(h.devices)}" + (f" (claim {h.claim})" if h.claim else "")),
        )
    return table


def _legend(view: TopView) -> list[Text]:
    if view.health_known:
        return [Text("n held by pod n  · free  ✗ unhealthy  !n unhealthy, held by pod n", style="dim")]
    return [
        Text("n held by pod n  · free  ?n held by pod n, not allocatable", style="dim"),
        Text("PodResources lists healthy devices only: free unhealthy devices are missing,", style="dim"),
        Text("and a held one that is not allocatable is unhealthy or its plugin is gone.", style="dim"),
    ]


def _pods_count(n: int) -> str:
    return counted(n, "pod")


def render(view: TopView) -> RenderableType:
    """The frame (without the live footer)."""
    numbers = {pod: i for i, pod in enumerate(view.pods(), start=1)}
    parts: list[RenderableType] = [Text(view.source, style="italic")]
    if not view.resources:
        parts.append(Text("no device-plugin resources or DRA drivers registered", style="dim"))
    for r in view.resources:
        parts.extend([Text(""), _resource(r, numbers, view.health_known)])
    totals = _Counts.of(d for r in view.resources for d in r.devices)
    total = sum(len(r.devices) for r in view.resources)
    parts.extend(
        [
            Text(""),
            Text(
                f"node: {totals.describe(total, view.health_known)}; {_pods_count(len(numbers))}",
                style="bold",
            ),
        ]
    )
    if view.held:
        parts.extend([Text(""), _pods(view, numbers)])
    parts.extend([Text(""), *_legend(view)])
    return Group(*parts)
