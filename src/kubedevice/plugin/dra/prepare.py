"""NodePrepareResources and NodeUnprepareResources, apart from the wire: what the SDK does per claim.

The walk of a prepare, as the kubelet's Go helper does it: fetch every claim first, outside the lock
(a slow API server must not hold up other calls); any claim that cannot be fetched, is not allocated
or was replaced fails the whole call. Then, one call at a time per driver: per claim, answer from the
state file (kept in memory, read again when it changed) when this boot prepared it already (re-writing a
CDI spec file that went missing), else run the hook; one claim's failure is that claim's error only. The
state is written before the answer leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedevice.cdi_names import parse_qualified_name
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi import spec_from_json, write_spec
from kubedevice.plugin.dra.backend_api import ClaimFetchError, DRABackend
from kubedevice.plugin.dra.cdi_claims import claim_spec_file_name, prepare_with_allocate
from kubedevice.plugin.dra.model import Claim, ClaimRef, PreparedDevice, claim_from_json
from kubedevice.plugin.dra.state import CallLock, ClaimState, PreparedClaim, StateStore
from kubedevice.plugin.events import EventBus, EventKind
from kubedevice.plugin.model import Device

log = logging.getLogger(__name__)


class CallFailed(Exception):
    """The whole call fails (a gRPC error): the kubelet ignores the answer and asks again later."""


@dataclass(frozen=True)
class PrepareAnswer:
    devices: tuple[Mapping[str, Any], ...] = ()
    error: str = ""


@dataclass
class ClaimPreparer:
    """Prepares and unprepares one driver's claims; `lock` serialises the calls (and instances)."""

    plugin: DevicePlugin
    driver: str
    backend: DRABackend
    state_file: Path
    cdi_spec_dir: Path
    #: The DRA face's devices by ID, and published device names to IDs.
    devices: Callable[[], Mapping[str, Device]]
    names: Callable[[], Mapping[str, str]]
    boot_id: Callable[[], str]
    lock: CallLock
    events: EventBus
    custom_prepare: bool = False
    _store: StateStore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._store = StateStore(self.state_file)

    async def prepare(self, refs: Sequence[ClaimRef]) -> dict[str, PrepareAnswer]:
        claims = await self._fetch(refs)
        async with self.lock.held():
            state = await self._load()
            boot = await asyncio.to_thread(self.boot_id)
            answers: dict[str, PrepareAnswer] = {}
            changed = False
            for claim in claims:
                entry = state.claims.get(claim.uid)
                try:
                    if entry is not None and entry.boot_id == boot:
                        await asyncio.to_thread(_restore_specs, entry)
                        answers[claim.uid] = PrepareAnswer(entry.devices)
                        self._emit(EventKind.PREPARE_CACHED, claim.ref)
                        continue
                    entry = await self._run_hook(claim, boot)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("prepare of claim %s (%s) failed: %s", claim, claim.uid, exc)
                    answers[claim.uid] = PrepareAnswer(error=str(exc) or type(exc).__name__)
                    continue
                state.claims[claim.uid] = entry
                changed = True
                answers[claim.uid] = PrepareAnswer(entry.devices)
                self._emit(EventKind.PREPARE, claim.ref)
            if changed:
                await self._save(state, "prepare")
            return answers

    async def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        async with self.lock.held():
            state = await self._load()
            errors: dict[str, str] = {}
            changed = False
            for ref in refs:
                errors[ref.uid] = ""
                entry = state.claims.get(ref.uid)
                if entry is None:
                    continue  # never prepared here (or unprepared already): nothing to undo
                try:
                    await self.plugin.unprepare(ref)
                    await asyncio.to_thread(_remove_specs, entry)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("unprepare of claim %s (%s) failed: %s", ref, ref.uid, exc)
                    errors[ref.uid] = str(exc) or type(exc).__name__
                    continue
                del state.claims[ref.uid]
                changed = True
                self._emit(EventKind.UNPREPARE, ref)
            if changed:
                await self._save(state, "unprepare")
            return errors

    async def _fetch(self, refs: Sequence[ClaimRef]) -> list[Claim]:
        claims: list[Claim] = []
        for ref in refs:
            where = f"{ref.namespace}/{ref.name}"
            try:
                data = await self.backend.get_claim(ref.namespace, ref.name)
            except asyncio.CancelledError:
                raise
            except ClaimFetchError as exc:
                raise CallFailed(f"get resource claims: retrieve claim {where}: {exc}") from exc
            except Exception as exc:
                raise CallFailed(f"get resource claims: retrieve claim {where}: {exc}") from exc
            if not ((data.get("status") or {}).get("allocation")):
                raise CallFailed(f"get resource claims: claim {where} not allocated")
            if (data.get("metadata") or {}).get("uid") != ref.uid:
                raise CallFailed(f"get resource claims: claim {where} got replaced")
            claims.append(claim_from_json(data, self.driver, self.names()))
        return claims

    async def _run_hook(self, claim: Claim, boot: str) -> PreparedClaim:
        specs: dict[str, dict[str, Any]] = {}
        if self.custom_prepare:
            answer = await self.plugin.prepare(claim)
            if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
                raise TypeError(
                    f"prepare() must return a sequence of PreparedDevice, got {type(answer).__name__}"
                )
            prepared = list(answer)
        else:
            result = await prepare_with_allocate(self.plugin, self.driver, claim, self.devices())
            prepared = result.devices
            if result.spec is not None:
                path = self.cdi_spec_dir / claim_spec_file_name(self.driver, claim.uid)
                specs[str(path)] = result.spec.to_json()
                await asyncio.to_thread(_write_specs, specs)
        return PreparedClaim(
            namespace=claim.namespace,
            name=claim.name,
            devices=tuple(_to_wire(p) for p in prepared),
            cdi_spec_files=tuple(specs),
            boot_id=boot,
            cdi_specs=specs,
        )

    async def _load(self) -> ClaimState:
        try:
            return await asyncio.to_thread(self._store.load)
        except Exception as exc:
            raise CallFailed(f"read DRA state: {exc}") from exc

    async def _save(self, state: ClaimState, what: str) -> None:
        try:
            await asyncio.to_thread(self._store.save, state)
        except OSError as exc:
            raise CallFailed(f"{what}: write DRA state {self.state_file}: {exc.strerror or exc}") from exc

    def _emit(self, kind: EventKind, ref: ClaimRef) -> None:
        log.log(self.events.said_level, "%s of claim %s (%s)", kind, ref, ref.uid)
        self.events.emit(kind, claim=str(ref), uid=ref.uid)


def _to_wire(prepared: PreparedDevice) -> dict[str, Any]:
    if not isinstance(prepared, PreparedDevice):
        raise TypeError(f"prepare() must return PreparedDevice objects, got {type(prepared).__name__}")
    for name in prepared.cdi_device_ids:
        parse_qualified_name(name)
    wire: dict[str, Any] = {
        "request_names": [prepared.result.request_name],
        "pool_name": prepared.result.pool,
        "device_name": prepared.result.device,
        "cdi_device_ids": list(prepared.cdi_device_ids),
    }
    if prepared.result.share_id is not None:
        wire["share_id"] = prepared.result.share_id
    return wire


def _write_specs(specs: Mapping[str, Mapping[str, Any]]) -> None:
    for file, data in specs.items():
        path = Path(file)
        write_spec(spec_from_json(data, file), path.parent, file_name=path.name)


def _restore_specs(entry: PreparedClaim) -> None:
    missing = {f: s for f, s in entry.cdi_specs.items() if not Path(f).exists()}
    if missing:
        log.info("re-writing CDI spec files that went missing: %s", ", ".join(sorted(missing)))
        _write_specs(missing)


def _remove_specs(entry: PreparedClaim) -> None:
    for file in entry.cdi_spec_files:
        Path(file).unlink(missing_ok=True)
