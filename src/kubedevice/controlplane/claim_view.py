"""The claims as an API server would show them: the manifest folder's claim documents and the claims the
daemon generated, each with the daemon's allocation and reservations filled in.

:class:`ClaimView` is the DRA manager's ClaimSource (`get_claim`) and what the status API lists.
"""

from __future__ import annotations

from collections.abc import Callable

from kubedevice.controlplane.claim_store import ClaimStore, effective_claim, to_resource_claim
from kubedevice.dra import types as dra
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

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        """ClaimSource: the claim as the kubelet's DRA manager reads it; ClaimNotFoundError when absent."""
        claim = self.claim(namespace, name)
        if claim is None:
            raise dra.ClaimNotFoundError(namespace, name)
        return to_resource_claim(claim)
