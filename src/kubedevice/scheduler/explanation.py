"""Why a claim waits: per request, how many devices each rule of the search ruled out, and the first
device each rule stopped. The scheduler says only "cannot allocate all claims"; this is what it leaves
out, shown by `kubedevice pods` for a Pending pod and by `kubedevice allocate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RULES", "RequestExplanation", "RuledOut"]

#: The rules a candidate device passes, in the order they are applied: a device is counted under the
#: first rule that rules it out.
RULES: tuple[str, ...] = (
    "node",  # the device (per-device node selection) is not for this node
    "in use",  # allocated to another claim (or, by this search, to an earlier request)
    "class selector",
    "request selector",
    "taint",  # a NoSchedule/NoExecute taint the request does not tolerate
    "counters",  # the shared counters it consumes are used up
    "capacity",  # its consumable capacity cannot hold the request
    "constraint",  # matchAttribute / distinctAttribute with the devices already taken
)


@dataclass(frozen=True, slots=True)
class RuledOut:
    """`count` devices ruled out by `rule`; `first` the first of them in search order (driver/pool/device),
    and `detail` what about it (e.g. the taint), when there is more to say."""

    rule: str
    count: int
    first: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "count": self.count, "first": self.first}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True, slots=True)
class RequestExplanation:
    """One request (or subrequest, `<request>/<subrequest>`) of one claim (`<namespace>/<name>`)."""

    claim: str
    request: str
    #: Devices the request wants (for `All`: every matching device).
    wanted: int
    #: Devices of usable pools looked at.
    candidates: int
    #: Devices that passed every rule.
    fit: int
    #: The rules that ruled devices out, in RULES order; none ruled out are left out.
    ruled_out: tuple[RuledOut, ...] = ()
    #: An `All` request: `wanted` is every device its selectors match, and it needs each of them free.
    all_mode: bool = False

    def text(self) -> str:
        """One line: `ns/c, request "gpu": 2 wanted, 1 of 4 fit; in use: 2 (first: drv/pool/dev-0); ...`."""
        wanted = f"all {self.wanted}" if self.all_mode else str(self.wanted)
        fit = f"{wanted} wanted, {self.fit} of {self.candidates} fit"
        parts = [f'{self.claim}, request "{self.request}": {fit}']
        for r in self.ruled_out:
            detail = f", {r.detail}" if r.detail else ""
            parts.append(f"{r.rule}: {r.count} (first: {r.first}{detail})")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "request": self.request,
            "wanted": self.wanted,
            "candidates": self.candidates,
            "fit": self.fit,
            "allocationMode": "All" if self.all_mode else "ExactCount",
            "ruledOut": [r.to_json() for r in self.ruled_out],
            "text": self.text(),
        }
