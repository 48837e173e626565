"""Device taints as the allocator sees them: the driver's own, then those of the DeviceTaintRules that
select the device, as upstream's ResourceSlice tracker patches a rule's taint into every device it selects
before the scheduler reads the slices (`resourceslice/tracker`, `applyPatches`)."""

from __future__ import annotations

from collections.abc import Iterable

from kubedevice.resource.model import DeviceTaintRuleDocument
from kubedevice.resource.slice_model import SliceDevice
from kubedevice.resource.taints import DeviceTaint

__all__ = ["TaintRules"]


class TaintRules:
    """The DeviceTaintRules of one allocation, in name order (upstream's order is its informer's)."""

    def __init__(self, rules: Iterable[DeviceTaintRuleDocument]) -> None:
        self._rules = sorted(rules, key=lambda r: r.meta.name)

    def taints(self, driver: str, pool: str, device: SliceDevice) -> tuple[DeviceTaint, ...]:
        """The device's taints: its slice's, then one per rule that selects it (a rule without a selector
        selects every device, as the tracker applies it)."""
        if not self._rules:
            return device.taints
        added = tuple(
            r.taint
            for r in self._rules
            if r.selector is None or r.selector.matches(driver, pool, device.name)
        )
        return (*device.taints, *added) if added else device.taints
