"""Checks 4 to 6 of the contract: Allocate, GetPreferredAllocation and PreStartContainer against the plugin.

Each check returns one report row; the run order lives in runner.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import grpc
import grpc.aio

from kubedevice.api.constants import HEALTHY, PRE_START_CONTAINER_TIMEOUT_S
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.conformance.checks import (
    ALLOCATE,
    PRE_START,
    PREFERRED_ALLOCATION,
    UNKNOWN_DEVICE_ID,
    RpcProbe,
    rpc_error,
)
from kubedevice.conformance.report import CheckResult, Findings, skipped
from kubedevice.conformance.validation import (
    cdi_name_problem,
    container_response_problems,
    preferred_allocation_problems,
    short_list,
)
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIRS, scan_spec_dirs
from kubedevice.wording import counted


async def allocate_check(
    stub: dp_grpc.DevicePluginAsyncStub,
    healthy: Sequence[str],
    timeout_s: float,
    cdi_spec_dirs: Sequence[Path] = DEFAULT_SPEC_DIRS,
) -> CheckResult:
    """Check 4: Allocate one device and every healthy device, then an ID the plugin never listed.

    Every valid CDI name in the answers must be defined by a spec in `cdi_spec_dirs`, or the runtime
    fails the container.
    """
    findings = Findings(ALLOCATE)
    if not healthy:
        return skipped(ALLOCATE, f'not run: no device is "{HEALTHY}", and the kubelet allocates only those')
    cases = [list(healthy[:1])]
    if len(healthy) > 1:
        cases.append(list(healthy))
    answered: list[str] = []
    cdi_names: set[str] = set()
    # The same mistake usually shows in every case: say it once, with the cases it showed in.
    failures: dict[str, list[int]] = {}
    warnings: dict[str, list[int]] = {}
    for ids in cases:
        request = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])
        try:
            response = await stub.Allocate(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as err:
            if len(ids) > 1 and err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                # A plugin may cap devices per container (shared devices: one replica each); the kubelet
                # then fails only the pods that ask for more, with this message.
                answered.append(f"{counted(len(ids), 'device')} refused ({rpc_error(err)})")
                continue
            failures.setdefault(f"Allocate failed: {rpc_error(err)}", []).append(len(ids))
            continue
        count = len(response.container_responses)
        if count != 1:
            message = (
                f"{count} container responses for 1 container request "
                "(answer exactly one per request, in order; the kubelet fails the pod otherwise)"
            )
            failures.setdefault(message, []).append(len(ids))
        for container in response.container_responses:
            cdi_names.update(c.name for c in container.cdi_devices if cdi_name_problem(c.name) is None)
            problems = container_response_problems(container)
            for failure in problems.failures:
                failures.setdefault(failure, []).append(len(ids))
            for warning in problems.warnings:
                warnings.setdefault(warning, []).append(len(ids))
        if count:
            answered.append(_describe(response.container_responses[0], len(ids)))
    for message, sizes in failures.items():
        findings.fail(f"{message} ({_cases(sizes)})")
    for message, sizes in warnings.items():
        findings.warn(f"{message} ({_cases(sizes)})")
    if answered:
        findings.note("; ".join(answered))
    if cdi_names:
        await _check_cdi_definitions(findings, cdi_names, cdi_spec_dirs)
    unknown = dp.AllocateRequest(
        container_requests=[dp.ContainerAllocateRequest(devices_ids=[UNKNOWN_DEVICE_ID])]
    )
    try:
        await stub.Allocate(unknown, timeout=timeout_s)
    except grpc.aio.AioRpcError as err:
        findings.note(f"unknown ID refused ({err.code().name})")
    else:
        findings.warn(f'accepted the unknown device ID "{UNKNOWN_DEVICE_ID}": refuse IDs you did not list')
    return findings.result()


async def _check_cdi_definitions(findings: Findings, names: set[str], spec_dirs: Sequence[Path]) -> None:
    folders = ", ".join(str(folder) for folder in spec_dirs)
    scan = await asyncio.to_thread(scan_spec_dirs, tuple(spec_dirs))
    undefined = sorted(names - scan.defined)
    if undefined:
        # A broken spec is the likeliest reason, and a runtime skips it just the same.
        skipped = f"; skipped as invalid: {scan.broken[0]}" if scan.broken else ""
        findings.warn(
            f"CDI device(s) {short_list(undefined)} named in Allocate answers are defined by no spec in "
            f"{folders}: the runtime fails the container — write a spec defining them "
            f"(or point --cdi-spec-dir at it){skipped}"
        )
    else:
        findings.note(f"{counted(len(names), 'CDI device')} defined by specs in {folders}")


def _cases(sizes: list[int]) -> str:
    distinct = list(dict.fromkeys(sizes))
    return "Allocate of " + ", ".join(map(str, distinct)) + (" device" if distinct == [1] else " devices")


def _describe(response: dp.ContainerAllocateResponse, devices: int) -> str:
    parts = [
        counted(len(response.devices), "device spec"),
        counted(len(response.mounts), "mount"),
        counted(len(response.envs), "env"),
        counted(len(response.cdi_devices), "CDI device"),
    ]
    return f"{counted(devices, 'device')} -> " + ", ".join(parts)


async def preferred_allocation_check(
    stub: dp_grpc.DevicePluginAsyncStub,
    options: dp.DevicePluginOptions,
    healthy: Sequence[str],
    timeout_s: float,
) -> tuple[CheckResult, RpcProbe | None]:
    """Check 5: a preferred allocation is a subset of the available IDs, holds must_include, has the size."""
    findings = Findings(PREFERRED_ALLOCATION)
    if not options.get_preferred_allocation_available:
        return skipped(
            PREFERRED_ALLOCATION, "not advertised: the kubelet never calls GetPreferredAllocation"
        ), None
    if not healthy:
        return skipped(PREFERRED_ALLOCATION, f'not run: no device is "{HEALTHY}"'), None
    # must_include is the *last* healthy device, so an answer that just takes the first N is caught.
    cases = [
        dp.ContainerPreferredAllocationRequest(
            available_deviceIDs=healthy,
            must_include_deviceIDs=[healthy[-1]],
            allocation_size=min(2, len(healthy)),
        ),
        dp.ContainerPreferredAllocationRequest(available_deviceIDs=healthy, allocation_size=len(healthy)),
    ]
    probe: RpcProbe | None = None
    for case in cases:
        what = (
            f"size {case.allocation_size} of {len(case.available_deviceIDs)}"
            f" with must_include {list(case.must_include_deviceIDs)}"
        )
        try:
            response = await stub.GetPreferredAllocation(
                dp.PreferredAllocationRequest(container_requests=[case]), timeout=timeout_s
            )
        except grpc.aio.AioRpcError as err:
            findings.fail(f"{what}: {rpc_error(err)}")
            probe = probe or RpcProbe(False, rpc_error(err))
            continue
        probe = RpcProbe(True)
        if len(response.container_responses) != 1:
            findings.fail(f"{what}: {len(response.container_responses)} container responses for 1 request")
            continue
        picked = list(response.container_responses[0].deviceIDs)
        for problem in preferred_allocation_problems(case, picked):
            findings.fail(f"{what}: {problem} (got {picked})")
    if not findings.failed:
        findings.note(f"{counted(len(cases), 'request')} answered with valid picks")
    return findings.result(), probe


async def pre_start_check(
    stub: dp_grpc.DevicePluginAsyncStub,
    options: dp.DevicePluginOptions,
    healthy: Sequence[str],
    timeout_s: float,
) -> tuple[CheckResult, RpcProbe | None]:
    """Check 6: PreStartContainer answers within the kubelet's 30 s when the plugin asks for it."""
    findings = Findings(PRE_START)
    if not options.pre_start_required:
        return skipped(
            PRE_START, "pre_start_required is false: the kubelet never calls PreStartContainer"
        ), None
    if not healthy:
        return skipped(PRE_START, f'not run: no device is "{HEALTHY}"'), None
    deadline_s = min(PRE_START_CONTAINER_TIMEOUT_S, timeout_s)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        await stub.PreStartContainer(
            dp.PreStartContainerRequest(devices_ids=list(healthy)), timeout=deadline_s
        )
    except grpc.aio.AioRpcError as err:
        if err.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
            wider = (
                ""
                if deadline_s >= PRE_START_CONTAINER_TIMEOUT_S
                else "; raise --timeout to test the full 30 s"
            )
            findings.fail(
                f"no answer within {deadline_s:g} s "
                f"(the kubelet allows {PRE_START_CONTAINER_TIMEOUT_S:g} s{wider})"
            )
        else:
            findings.fail(f"PreStartContainer failed: {rpc_error(err)}")
        return findings.result(), RpcProbe(False, rpc_error(err))
    elapsed = loop.time() - started
    findings.note(f"answered in {elapsed:.3f} s (the kubelet allows {PRE_START_CONTAINER_TIMEOUT_S:g} s)")
    return findings.result(), RpcProbe(True)
