"""What the DRA manager's operations share, as one explicit record (the kubelet's `Manager` fields)."""

from __future__ import annotations

from dataclasses import dataclass

from kubedevice.dra.checkpointing import StateWriter
from kubedevice.dra.claim_info import ClaimInfoCache
from kubedevice.dra.plugins import DRAPlugins
from kubedevice.dra.types import ClaimSource


@dataclass(slots=True)
class DRAState:
    cache: ClaimInfoCache
    plugins: DRAPlugins
    claims: ClaimSource
    writer: StateWriter
