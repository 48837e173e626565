"""The DRA driver checks: registration, published slices against health, and the claim calls.

Each check returns one report row; their order and the claims they share live in dra_run.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubedevice.api.constants import (
    DRA_HEALTH_SERVICES,
    DRA_PLUGIN_TYPE,
    DRA_V1_SERVICE,
    DRA_V1BETA1_SERVICE,
)
from kubedevice.cdi_names import CDIError, parse_qualified_name
from kubedevice.conformance.dra_kubelet import DRAKubelet, DRARegistration
from kubedevice.conformance.report import CheckResult, Findings
from kubedevice.conformance.validation import short_list
from kubedevice.dra.client import DRAPluginClient, PrepareResult
from kubedevice.dra.errors import DRACallError
from kubedevice.dra.types import DriverClaim
from kubedevice.plugin.cdi import scan_spec_dirs
from kubedevice.plugin.dra.backend.slice_file import slice_file
from kubedevice.resource.slice_rules import validate_pool, validate_slice_spec
from kubedevice.wording import counted

DRA_REGISTRATION = "dra-registration"
DRA_SLICES = "dra-slices"
DRA_PREPARE = "dra-prepare"
DRA_IDEMPOTENT = "dra-idempotent"
DRA_CDI = "dra-cdi"
DRA_UNPREPARE = "dra-unprepare"
DRA_CLAIM_ERRORS = "dra-claim-errors"
DRA_REREGISTRATION = "dra-reregistration"

#: Report order of the DRA rows.
DRA_CHECK_NAMES = (
    DRA_REGISTRATION,
    DRA_SLICES,
    DRA_PREPARE,
    DRA_IDEMPOTENT,
    DRA_CDI,
    DRA_UNPREPARE,
    DRA_CLAIM_ERRORS,
    DRA_REREGISTRATION,
)

#: A device no driver publishes: a claim allocated it must fail alone.
UNKNOWN_DEVICE = "kubedevice-conformance-no-such-device"
#: How often the slice file and the health cache are looked at while waiting for them to agree.
RECHECK_S = 0.05
#: The taint effects that keep new allocations off a device: an unhealthy device may be published so.
BLOCKING = ("NoSchedule", "NoExecute")


def registration_check(
    registration: DRARegistration | None,
    waited_s: float,
    timeout_s: float,
    registry: Path,
    exit_note: str | None,
) -> CheckResult:
    """GetInfo as the kubelet's plugin watcher judged it, and the order of the advertised services."""
    findings = Findings(DRA_REGISTRATION)
    if registration is None:
        if exit_note is not None:
            findings.fail(f"the plugin {exit_note} before registering")
        else:
            findings.fail(f"no registration socket in {registry} answered GetInfo within {timeout_s:g} s")
        return findings.result()
    if registration.type != DRA_PLUGIN_TYPE:
        findings.fail(
            f'GetInfo answered type "{registration.type}": a DRA driver registers as "{DRA_PLUGIN_TYPE}"'
        )
        return findings.result()
    if not registration.accepted:
        findings.fail(f"the kubelet refused the registration: {registration.refusal}")
        return findings.result()
    versions = list(registration.versions)
    if DRA_V1_SERVICE not in versions:
        findings.fail(
            f'supported_versions {versions} lack "{DRA_V1_SERVICE}": kubelets from 1.34 on call v1, '
            "and v1beta1 goes away — serve and advertise v1"
        )
    elif DRA_V1BETA1_SERVICE in versions and versions.index(DRA_V1BETA1_SERVICE) < versions.index(
        DRA_V1_SERVICE
    ):
        findings.fail(
            f'supported_versions {versions} list "{DRA_V1BETA1_SERVICE}" before "{DRA_V1_SERVICE}": '
            "the kubelet takes the first it knows — put v1 first"
        )
    health = next((s for s in DRA_HEALTH_SERVICES if s in versions), None)
    findings.note(
        f'registered "{registration.name}" after {waited_s:.2f} s, endpoint "{registration.endpoint}", '
        f"services {', '.join(versions)}"
        + ("" if health else "; no health service (the kubelet learns no device health)")
    )
    return findings.result()


@dataclass(frozen=True)
class Published:
    """What the slice file says: the pool and its device names (empty when nothing could be read), and
    those with a taint that keeps new allocations off them (NoSchedule, NoExecute)."""

    pool: str = ""
    devices: tuple[str, ...] = ()
    tainted: frozenset[str] = frozenset()


def read_slices(path: Path, driver: str, node_name: str) -> tuple[Published, list[str]]:
    """The slice file's pool and devices, and what is wrong with it: a document the API server would
    refuse (its validation, resource.slice_rules), a pool that does not hold together (a device consuming
    a counter set it lacks...), another driver or node (blocking: call from a thread)."""
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as err:
        return Published(), [f"{path} cannot be read: {err}"]
    problems: list[str] = []
    pools: set[str] = set()
    devices: list[str] = []
    tainted: set[str] = set()
    specs: list[dict[str, Any]] = []
    for number, document in enumerate(documents, 1):
        spec = document.get("spec") if isinstance(document, dict) else None
        if (
            not isinstance(document, dict)
            or document.get("kind") != "ResourceSlice"
            or not isinstance(spec, dict)
        ):
            problems.append(f"{path}: document {number} is not a ResourceSlice")
            continue
        if spec.get("driver") != driver:
            problems.append(f"{path}: document {number} is for driver {spec.get('driver')!r}, not {driver!r}")
        if spec.get("nodeName") != node_name:
            problems.append(
                f"{path}: document {number} has nodeName {spec.get('nodeName')!r}, "
                f"not the node's {node_name!r}"
            )
        refusals = validate_slice_spec(spec)
        problems += [f"{path}: document {number}: {e} (the API server refuses it)" for e in refusals[:3]]
        if len(refusals) > 3:
            problems.append(f"{path}: document {number}: {len(refusals) - 3} more refusals")
        specs.append(spec)
        pool = spec.get("pool")
        if isinstance(pool, dict) and isinstance(pool.get("name"), str):
            pools.add(pool["name"])
        for device in spec.get("devices") or []:
            if isinstance(device, dict) and isinstance(device.get("name"), str):
                devices.append(device["name"])
                taints = device.get("taints") or ()
                if any(isinstance(t, dict) and t.get("effect") in BLOCKING for t in taints):
                    tainted.add(device["name"])
    if len(pools) > 1:
        problems.append(f"{path}: {len(pools)} pools {sorted(pools)} where one pool per node is expected")
    pool = sorted(pools)[0] if pools else ""
    if not problems:
        problems += [f"{path}: {p}" for p in validate_pool(pool, specs)]
        counts = {(s.get("pool") or {}).get("resourceSliceCount") for s in specs}
        if counts != {len(specs)}:
            problems.append(
                f"{path}: resourceSliceCount {sorted(map(str, counts))} but {counted(len(specs), 'slice')} "
                "in the pool — count every slice, those of counter sets too"
            )
    return Published(pool, tuple(dict.fromkeys(devices)), frozenset(tainted)), problems


async def slices_check(
    kubelet: DRAKubelet, registration: DRARegistration, timeout_s: float
) -> tuple[CheckResult, Published]:
    """The standalone slice file is published, and agrees with the health stream once both settle."""
    findings = Findings(DRA_SLICES)
    driver = registration.name
    path = slice_file(kubelet.kubelet_dir, driver)
    has_health = any(s in registration.versions for s in DRA_HEALTH_SERVICES)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    published, problems, disagreement = Published(), [f"no slice file {path} within {timeout_s:g} s"], ""
    while True:
        if await asyncio.to_thread(path.exists):
            published, problems = await asyncio.to_thread(read_slices, path, driver, kubelet.node_name)
            health = {device: info.health for (_, device), info in kubelet.device_health(driver).items()}
            disagreement = health_disagreement(published, health) if has_health else ""
            if not problems and not disagreement:
                break
        if loop.time() >= deadline:
            break
        await asyncio.sleep(RECHECK_S)
    for problem in problems:
        findings.fail(problem)
    if disagreement:
        findings.fail(disagreement)
    if not problems and not published.devices:
        findings.warn("no device published: the scheduler can allocate nothing of this driver")
    if not problems:
        findings.note(f"{counted(len(published.devices), 'device')} published in pool {published.pool!r}")
        if has_health:
            findings.note("every published device is HEALTHY in the health stream")
    return findings.result(), published


def health_disagreement(published: Published, health: Mapping[str, str]) -> str:
    """Why the slices and the health stream disagree: a published device the stream does not report, or
    one it reports unhealthy that is published without a taint keeping allocations off it."""
    if not health:
        return "the health stream reported no device"
    unreported = [d for d in published.devices if d not in health]
    if unreported:
        return f"published devices {short_list(unreported)} are missing from the health stream"
    unhealthy = [d for d in published.devices if health[d] != "Healthy" and d not in published.tainted]
    if unhealthy:
        return (
            f"published devices {short_list(unhealthy)} are not HEALTHY in the health stream: publish "
            "healthy devices only, or taint the unhealthy ones (NoSchedule or NoExecute)"
        )
    return ""


def claim_ref(claim: Mapping[str, Any]) -> DriverClaim:
    meta = claim["metadata"]
    return DriverClaim(meta["namespace"], meta["uid"], meta["name"])


async def call_prepare(
    client: DRAPluginClient, refs: Sequence[DriverClaim]
) -> dict[str, PrepareResult] | str:
    """The answer, or the whole call's error text."""
    try:
        return await client.node_prepare_resources(refs)
    except DRACallError as err:
        return str(err)


def answer_problems(
    answer: Mapping[str, PrepareResult], ref: DriverClaim, pool: str, devices: Sequence[str]
) -> list[str]:
    """Why one claim's entry is not a good answer for a claim allocated `devices` of `pool`."""
    result = answer.get(ref.uid)
    if result is None:
        return [f"no entry for claim {ref.name} (UID {ref.uid}): the kubelet fails the pod"]
    if result.error:
        return [f"claim {ref.name} failed: {result.error}"]
    problems: list[str] = []
    if not result.devices:
        problems.append(f"claim {ref.name}: no device in the answer")
    wanted = {(pool, device) for device in devices}
    for device in result.devices:
        if (device.pool_name, device.device_name) not in wanted:
            problems.append(
                f"claim {ref.name}: device {device.pool_name}/{device.device_name} was not allocated to it"
            )
        for cdi_id in device.cdi_device_ids or ():
            try:
                parse_qualified_name(cdi_id)
            except CDIError as err:
                problems.append(f"claim {ref.name}: {err}")
    return problems


def cdi_ids(result: PrepareResult) -> list[str]:
    return [cdi_id for device in result.devices for cdi_id in device.cdi_device_ids or ()]


async def cdi_check(ids: Sequence[str], spec_dirs: Sequence[Path]) -> CheckResult:
    """The CDI device IDs a prepare answered are defined by a spec the runtime reads."""
    findings = Findings(DRA_CDI)
    folders = ", ".join(str(folder) for folder in spec_dirs)
    if not ids:
        findings.warn("the prepared claim has no CDI device IDs: the container gets nothing of its devices")
        return findings.result()
    scan = await asyncio.to_thread(scan_spec_dirs, tuple(spec_dirs))
    undefined = sorted(set(ids) - scan.defined)
    if undefined:
        skipped = f"; skipped as invalid: {scan.broken[0]}" if scan.broken else ""
        findings.warn(
            f"CDI device(s) {short_list(undefined)} of the prepared claim are defined by no spec in "
            f"{folders}: the runtime fails the container — write a spec defining them "
            f"(or point --cdi-spec-dir at it){skipped}"
        )
    else:
        findings.note(f"{counted(len(set(ids)), 'CDI device')} defined by specs in {folders}")
    return findings.result()
