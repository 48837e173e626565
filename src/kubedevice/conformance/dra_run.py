"""The DRA checks of one run, in the order the kubelet meets a driver: registration, slices, claims, and
a plugins_registry folder made again.

The claims are the checker's: it serves them on the stand-in daemon's `GET /claims`, allocated devices
the driver published, and asks the driver to prepare and unprepare them as the kubelet would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from kubedevice.conformance.dra_checks import (
    DRA_CDI,
    DRA_CLAIM_ERRORS,
    DRA_IDEMPOTENT,
    DRA_PREPARE,
    DRA_REGISTRATION,
    DRA_REREGISTRATION,
    DRA_SLICES,
    DRA_UNPREPARE,
    UNKNOWN_DEVICE,
    Published,
    answer_problems,
    call_prepare,
    cdi_check,
    cdi_ids,
    claim_ref,
    registration_check,
    slices_check,
)
from kubedevice.conformance.dra_kubelet import DRAKubelet, DRARegistration, claim
from kubedevice.conformance.report import CheckResult, Findings, not_run
from kubedevice.dra.client import DRAPluginClient
from kubedevice.dra.errors import DRACallError, DriverLookupError
from kubedevice.dra.types import DriverClaim


class DRARun:
    """The DRA rows of one conformance run against `kubelet`; `exit_note()` says whether the plugin died."""

    def __init__(
        self,
        kubelet: DRAKubelet,
        timeout_s: float,
        cdi_spec_dirs: Callable[[], tuple[Path, ...]],
        exit_note: Callable[[], str | None],
        set_phase: Callable[[str], None],
    ) -> None:
        self.kubelet = kubelet
        self.timeout_s = timeout_s
        self.cdi_spec_dirs = cdi_spec_dirs
        self.exit_note = exit_note
        self.set_phase = set_phase
        self.rows: dict[str, CheckResult] = {}
        self._run_id = uuid.uuid4().hex[:8]

    async def execute(self, registration: DRARegistration | None, waited_s: float) -> dict[str, CheckResult]:
        rows = self.rows
        rows[DRA_REGISTRATION] = registration_check(
            registration, waited_s, self.timeout_s, self.kubelet.registry_dir, self.exit_note()
        )
        if registration is None or not registration.accepted or registration.type != "DRAPlugin":
            why = "the driver did not register" if registration is None else "the registration was refused"
            for name in (DRA_SLICES, DRA_PREPARE, DRA_IDEMPOTENT, DRA_CDI, DRA_UNPREPARE, DRA_CLAIM_ERRORS):
                rows[name] = not_run(name, why)
            rows[DRA_REREGISTRATION] = not_run(DRA_REREGISTRATION, why)
            return rows
        self.set_phase("DRA slices")
        rows[DRA_SLICES], published = await slices_check(self.kubelet, registration, self.timeout_s)
        self.set_phase("DRA claims")
        await self._claims(registration.name, published)
        self.set_phase("DRA re-registration")
        rows[DRA_REREGISTRATION] = await self._reregistration(registration.name)
        return rows

    def _claim(self, number: int, pool: str, driver: str, *devices: str) -> DriverClaim:
        document = claim(f"conformance-{number}", f"{self._run_id}-{number}", driver, pool, devices)
        self.kubelet.put_claim(document)
        return claim_ref(document)

    async def _claims(self, driver: str, published: Published) -> None:
        rows = self.rows
        names = (DRA_PREPARE, DRA_IDEMPOTENT, DRA_CDI, DRA_UNPREPARE, DRA_CLAIM_ERRORS)
        if not published.devices:
            for name in names:
                rows[name] = not_run(name, "no device was published")
            return
        try:
            client = self.kubelet.client(driver)
        except DriverLookupError as err:
            for name in names:
                rows[name] = not_run(name, f"the driver is gone: {err}")
            return
        device = published.devices[0]
        ref = self._claim(1, published.pool, driver, device)
        findings = Findings(DRA_PREPARE)
        answer = await call_prepare(client, [ref])
        if isinstance(answer, str):
            findings.fail(f"NodePrepareResources failed: {answer}")
            rows[DRA_PREPARE] = findings.result()
            for name in names[1:]:
                rows[name] = not_run(name, "the prepare of a valid claim failed")
            return
        for problem in answer_problems(answer, ref, published.pool, [device]):
            findings.fail(problem)
        extra = sorted(set(answer) - {ref.uid})
        if extra:
            findings.fail(f"the answer holds claim UIDs nobody asked for: {extra}")
        first = answer.get(ref.uid)
        if first is not None and not first.error:
            findings.note(f"claim allocated {device} prepared: CDI devices {cdi_ids(first)}")
        rows[DRA_PREPARE] = findings.result()
        if findings.failed or first is None:
            for name in names[1:]:
                rows[name] = not_run(name, "the prepare of a valid claim failed")
            return
        rows[DRA_IDEMPOTENT] = await self._again(client, ref, first)
        rows[DRA_CDI] = await cdi_check(cdi_ids(first), self.cdi_spec_dirs())
        rows[DRA_UNPREPARE] = await self._unprepare(client, ref)
        rows[DRA_CLAIM_ERRORS] = await self._isolation(client, driver, published)

    async def _again(self, client: DRAPluginClient, ref: DriverClaim, first: object) -> CheckResult:
        findings = Findings(DRA_IDEMPOTENT)
        again = await call_prepare(client, [ref])
        if isinstance(again, str):
            findings.fail(f"a second NodePrepareResources of the same claim failed: {again}")
        elif again.get(ref.uid) != first:
            findings.fail(
                f"a second NodePrepareResources of the same claim answered {again.get(ref.uid)} after "
                f"{first}: the kubelet asks again after its restart and must get the same devices"
            )
        else:
            findings.note("the same answer twice")
        return findings.result()

    async def _unprepare(self, client: DRAPluginClient, ref: DriverClaim) -> CheckResult:
        findings = Findings(DRA_UNPREPARE)
        unknown = DriverClaim("default", f"{self._run_id}-never-prepared", "conformance-never-prepared")
        try:
            answer = await client.node_unprepare_resources([ref, unknown])
        except DRACallError as err:
            findings.fail(f"NodeUnprepareResources failed: {err}")
            return findings.result()
        for what, one in (("the prepared claim", ref), ("a claim never prepared", unknown)):
            if one.uid not in answer:
                findings.fail(f"no entry for {what} ({one.name}): the kubelet takes that as a failure")
            elif answer[one.uid]:
                findings.fail(f"unprepare of {what} failed: {answer[one.uid]}")
        if answer.get(unknown.uid):
            findings.note(
                "an unknown claim must unprepare as a success: the kubelet retries it until it does"
            )
        if not findings.failed:
            findings.note("the prepared claim and a claim never prepared both unprepared")
        return findings.result()

    async def _isolation(self, client: DRAPluginClient, driver: str, published: Published) -> CheckResult:
        """One claim allocated a device the driver does not have: that claim fails, the other prepares."""
        findings = Findings(DRA_CLAIM_ERRORS)
        good = self._claim(2, published.pool, driver, published.devices[0])
        bad = self._claim(3, published.pool, driver, UNKNOWN_DEVICE)
        answer = await call_prepare(client, [good, bad])
        if isinstance(answer, str):
            findings.fail(
                f"one claim allocated a device the driver does not have failed the whole call ({answer}): "
                "answer an error for that claim only"
            )
            return findings.result()
        bad_result = answer.get(bad.uid)
        if bad_result is None:
            findings.fail(f"no entry for the claim allocated {UNKNOWN_DEVICE}: answer every claim")
        elif not bad_result.error:
            findings.fail(f"the claim allocated {UNKNOWN_DEVICE}, which was never published, was prepared")
        for problem in answer_problems(answer, good, published.pool, [published.devices[0]]):
            findings.fail(f"beside a bad claim, {problem}")
        if not findings.failed and bad_result is not None:
            findings.note(f"the bad claim alone failed: {bad_result.error}")
        try:
            await client.node_unprepare_resources([good, bad])
        except DRACallError as err:
            findings.warn(f"cleaning up: NodeUnprepareResources failed: {err}")
        return findings.result()

    async def _reregistration(self, driver: str) -> CheckResult:
        findings = Findings(DRA_REREGISTRATION)
        if self.exit_note() is not None:
            findings.fail(f"the plugin {self.exit_note()}")
            return findings.result()
        self.kubelet.forget_registrations()
        await self.kubelet.recreate_registry()
        loop = asyncio.get_running_loop()
        made = loop.time()
        deadline = made + self.timeout_s
        while True:
            registration = await self.kubelet.next_registration(deadline - loop.time())
            if registration is None:
                exit_note = self.exit_note()
                findings.fail(
                    f"the plugin {exit_note}"
                    if exit_note
                    else f"no registration within {self.timeout_s:g} s after plugins_registry was made again "
                    "(watch the folder and serve the registration socket again when it is gone)"
                )
                return findings.result()
            if registration.accepted and registration.name == driver:
                break
            findings.warn(f"a registration was refused first ({registration.refusal})")
        findings.note(
            f"registered again {(registration.received_at - made) * 1000:.0f} ms after the folder came back"
        )
        return findings.result()
