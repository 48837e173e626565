"""NodePrepareResources and NodeUnprepareResources, apart from the wire: what the SDK does per claim.

The walk of a prepare, as the kubelet's Go helper does it: fetch every claim first, outside the lock
(a slow API server must not hold up other calls); any claim that cannot be fetched, is not allocated
or was replaced fails the whole call. Then, one call at a time per driver: per claim, refuse a result
naming a pool the driver does not publish (a device is its driver, pool and name), answer from the
state file (kept in memory, read again when it changed) when this boot prepared it already (re-writing a
CDI spec file that went missing), else run the hook; one claim's failure is that claim's error only. The
state is written before the answer leaves, once for all the calls that waited meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedevice.cdi_names import parse_qualified_name
from kubedevice.durable import GroupCommit
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.cdi import spec_from_json, write_spec
from kubedevice.plugin.dra.backend_api import ClaimFetchError, DRABackend
from kubedevice.plugin.dra.cdi_claims import ClaimError, claim_spec_file_name, prepare_with_allocate
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


@dataclass(eq=False)
class _Call:
    """One NodePrepareResources (its fetched claims) or NodeUnprepareResources (`claims` None) waiting
    for the batch that runs it; `answer` gets its result or CallFailed."""

    what: str
    refs: Sequence[ClaimRef]
    claims: list[Claim] | None
    answer: asyncio.Future[Any]


@dataclass
class ClaimPreparer:
    """Prepares and unprepares one driver's claims; `lock` serialises the calls (and instances).

    Calls run in batches, in arrival order, by group commit (kubedevice.durable.GroupCommit): a batch
    takes every call waiting, holds the lock, runs them one after another on one copy of the state and
    writes it once; calls that arrive during a batch share the next one instead of paying a write (and
    its fsyncs) each. A call cancelled before its batch starts is not run; one cancelled during it is
    finished and recorded (the kubelet's retry is then answered from the state).
    """

    plugin: DevicePlugin
    driver: str
    backend: DRABackend
    state_file: Path
    cdi_spec_dir: Path
    #: The DRA face's devices by ID, and published device names to IDs.
    devices: Callable[[], Mapping[str, Device]]
    names: Callable[[], Mapping[str, str]]
    #: The pools the driver publishes its devices in (none known: not checked).
    pools: Callable[[], frozenset[str]]
    boot_id: Callable[[], str]
    lock: CallLock
    events: EventBus
    custom_prepare: bool = False
    _store: StateStore = field(init=False, repr=False)
    _waiting: list[_Call] = field(init=False, repr=False, default_factory=list)
    _batches: GroupCommit = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._store = StateStore(self.state_file)
        self._batches = GroupCommit(self._run_batch, name=f"dra-calls {self.driver}")

    @property
    def queued(self) -> int:
        """Calls waiting for their batch to start."""
        return len(self._waiting)

    async def prepare(self, refs: Sequence[ClaimRef]) -> dict[str, PrepareAnswer]:
        claims = await self._fetch(refs)
        answers: dict[str, PrepareAnswer] = await self._submit("prepare", refs, claims)
        return answers

    async def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        errors: dict[str, str] = await self._submit("unprepare", refs, None)
        return errors

    async def _submit(self, what: str, refs: Sequence[ClaimRef], claims: list[Claim] | None) -> Any:
        call = _Call(what, refs, claims, asyncio.get_running_loop().create_future())
        self._waiting.append(call)
        try:
            await self._batches.commit()
        except BaseException:
            call.answer.cancel()  # a batch that has not taken it skips it; one that has drops its answer
            raise
        return call.answer.result()

    async def _run_batch(self) -> bool:
        """Run the calls waiting, one after another, and write the state once if any changed it."""
        if not self._waiting:
            return False  # taken by the batch before: it answered them already
        async with self.lock.held():
            batch, self._waiting = [c for c in self._waiting if not c.answer.done()], []
            return await self._run(batch) if batch else False

    async def _run(self, batch: list[_Call]) -> bool:
        """Answer each call of the batch; True when the state was written."""
        try:
            state = await self._load()
            boot = await asyncio.to_thread(self.boot_id)
            results: list[Any] = []
            changed = False
            for call in batch:
                result: Any
                if call.claims is not None:
                    result, more = await self._prepare(state, call.claims, boot)
                else:
                    result, more = await self._unprepare(state, call.refs)
                results.append(result)
                changed = changed or more
            if changed:
                await asyncio.to_thread(self._store.save, state)
        except CallFailed as exc:
            _answer_all(batch, exc)
            return False
        except OSError as exc:
            for call in batch:
                if not call.answer.done():
                    call.answer.set_exception(
                        CallFailed(f"{call.what}: write DRA state {self.state_file}: {exc.strerror or exc}")
                    )
            return False
        except Exception as exc:  # a bug: every caller fails with it rather than waiting forever
            log.exception("a batch of DRA calls failed")
            _answer_all(batch, exc)
            return False
        for call, result in zip(batch, results, strict=True):
            if not call.answer.done():
                call.answer.set_result(result)
        return changed

    async def _prepare(
        self, state: ClaimState, claims: list[Claim], boot: str
    ) -> tuple[dict[str, PrepareAnswer], bool]:
        answers: dict[str, PrepareAnswer] = {}
        changed = False
        for claim in claims:
            entry = state.claims.get(claim.uid)
            try:
                self._check_pools(claim)
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
        return answers, changed

    def _check_pools(self, claim: Claim) -> None:
        """A result names its device by driver, pool and name: one in a pool the driver does not publish is
        not its device, even when a device of that name is (a hand-written allocation's pool, say)."""
        pools = self.pools()
        for result in claim.results:
            if pools and result.pool not in pools:
                have = ", ".join(sorted(pools))
                raise ClaimError(
                    f"claim {claim}: device {result.device} of pool {result.pool} is not one of "
                    f"{self.driver}'s devices (its pool{'s are' if len(pools) > 1 else ' is'} {have})"
                )

    async def _unprepare(self, state: ClaimState, refs: Sequence[ClaimRef]) -> tuple[dict[str, str], bool]:
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
        return errors, changed

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

    def _emit(self, kind: EventKind, ref: ClaimRef) -> None:
        log.log(self.events.said_level, "%s of claim %s (%s)", kind, ref, ref.uid)
        self.events.emit(kind, claim=str(ref), uid=ref.uid)


def _answer_all(batch: list[_Call], exc: BaseException) -> None:
    for call in batch:
        if not call.answer.done():
            call.answer.set_exception(exc)


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
