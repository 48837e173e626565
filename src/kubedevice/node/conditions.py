"""The pod's `status.conditions` the daemon sets (core/v1 PodCondition): the device taint eviction
controller's `DisruptionTarget`, kept with the pod in the state file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PodCondition"]


@dataclass(frozen=True, slots=True)
class PodCondition:
    """One of the pod's `status.conditions` (core/v1 PodCondition) that the daemon sets: the eviction
    controller's `DisruptionTarget`. `last_transition_time` is RFC 3339 ("" unknown)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "lastTransitionTime": self.last_transition_time or None,
            "reason": self.reason,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, value: Any) -> PodCondition:
        """What `to_json` wrote (pod_state.json); raises KeyError or TypeError when it is not that."""
        return cls(
            type=str(value["type"]),
            status=str(value["status"]),
            reason=str(value["reason"]),
            message=str(value["message"]),
            last_transition_time=str(value["lastTransitionTime"] or ""),
        )
