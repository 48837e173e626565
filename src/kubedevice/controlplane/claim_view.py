"""The claims as an API server would show them: the manifest folder's claim documents and the claims the
daemon generated, each with the daemon's allocation and reservations filled in.

:class:`ClaimView` is the DRA manager's ClaimSource (`get_claim`) and what the status API lists; it reads a
device's conditions in the claim's `status.devices` (`device_conditions`) for whoever waits on them.
"""

from __future__ import annotations

from collections.abc import Callable

from kubedevice.controlplane.claim_store import ClaimStore, effective_claim, to_resource_claim
from kubedevice.dra import types as dra
from kubedevice.resource.device_status import DeviceCondition, device_conditions
from kubedevice.resource.model import ClaimDocument, DRADocuments

__all__ = ["ClaimView"]


class ClaimView:
    """Reads the current documents (`documents()`, the last scan's) and the claim state on every call,
    so it never holds a stale copy."""

    def __init__(self, documents: Callable[[], DRADocuments], state: ClaimStore) -> None:
        self._documents = documents
        self._state = state

    def claim(self, namespace: str, name: str) -> ClaimDocument | None:
        """The claim now, or None when there is none (its document removed, or never generated)."""
        key = f"{namespace}/{name}"
        return effective_claim(self._documents().claims.get(key), self._state.get(key))

    def claims(self) -> list[ClaimDocument]:
        """Every claim, sorted by namespace/name: documents first wins a name a generated claim has too."""
        documents = self._documents().claims
        keys = set(documents) | {k for k, r in self._state.records.items() if r.document is not None}
        found = (effective_claim(documents.get(k), self._state.get(k)) for k in sorted(keys))
        return [c for c in found if c is not None]

    def device_conditions(
        self, namespace: str, name: str, driver: str, pool: str, device: str, share_id: str | None = None
    ) -> tuple[DeviceCondition, ...]:
        """The conditions the driver reported for one allocated device (one share of it) of the claim;
        empty when the claim, the device or its status is not there."""
        claim = self.claim(namespace, name)
        if claim is None:
            return ()
        return device_conditions(claim.device_status, driver, pool, device, share_id)

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        """ClaimSource: the claim as the kubelet's DRA manager reads it; ClaimNotFoundError when absent."""
        claim = self.claim(namespace, name)
        if claim is None:
            raise dra.ClaimNotFoundError(namespace, name)
        return to_resource_claim(claim)
