"""Checks 1 to 3 of the contract (registration, options, ListAndWatch) and the names of every check.

Checks 4 to 6 (the plugin calls) are in plugin_call_checks.py.

Each check returns one report row; the run order and the kubelet restarts live in runner.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from kubedevice.api.constants import HEALTHY, VERSION
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.conformance.kubelet import Refusal, RegistrationAttempt
from kubedevice.conformance.report import CheckResult, Findings
from kubedevice.conformance.validation import (
    MAX_MESSAGE_BYTES,
    device_list_problems,
)
from kubedevice.wording import counted

REGISTRATION = "registration"
OPTIONS = "options"
LIST_AND_WATCH = "list-and-watch"
ALLOCATE = "allocate"
PREFERRED_ALLOCATION = "preferred-allocation"
PRE_START = "pre-start"
TOPOLOGY = "topology"
KUBELET_RESTART = "kubelet-restart"
KUBELET_ABSENCE = "kubelet-absence"
PLUGIN_PROCESS = "plugin-process"

#: Report order.
CHECK_NAMES = (
    REGISTRATION,
    OPTIONS,
    LIST_AND_WATCH,
    ALLOCATE,
    PREFERRED_ALLOCATION,
    PRE_START,
    TOPOLOGY,
    KUBELET_RESTART,
    KUBELET_ABSENCE,
    PLUGIN_PROCESS,
)

#: The kubelet has no deadline on the first list, but capacity reads 0 until it comes.
FIRST_LIST_WITHIN_S = 1.0
#: An ID no plugin lists; a plugin should refuse to allocate it.
UNKNOWN_DEVICE_ID = "kubedevice-conformance-no-such-device"


def rpc_error(err: grpc.aio.AioRpcError) -> str:
    return f"{err.code().name}: {err.details()}"


class ListAndWatchFeed:
    """One ListAndWatch stream read in the background, as the kubelet reads it: the latest snapshot wins."""

    def __init__(self, stub: dp_grpc.DevicePluginAsyncStub) -> None:
        self._stub = stub
        self.first: dp.ListAndWatchResponse | None = None
        self.first_delay_s: float | None = None
        self.latest: dp.ListAndWatchResponse | None = None
        self.error: str | None = None
        self.first_received = asyncio.Event()
        self.ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        opened = loop.time()
        try:
            async for message in self._stub.ListAndWatch(dp.Empty()):
                if self.first is None:
                    self.first = message
                    self.first_delay_s = loop.time() - opened
                    self.first_received.set()
                self.latest = message
            self.error = "the plugin returned from ListAndWatch"
        except grpc.aio.AioRpcError as err:
            self.error = rpc_error(err)
        finally:
            self.ended.set()

    async def wait_first(self, timeout_s: float) -> bool:
        """True once the first list arrived; False on timeout or when the stream ended without one."""
        waiters = [asyncio.create_task(self.first_received.wait()), asyncio.create_task(self.ended.wait())]
        try:
            await asyncio.wait(waiters, timeout=max(timeout_s, 0.0), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return self.first_received.is_set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def healthy_ids(message: dp.ListAndWatchResponse | None) -> list[str]:
    """Device IDs the kubelet would allocate from: health exactly "Healthy", first occurrence order."""
    if message is None:
        return []
    return list(
        dict.fromkeys(device.ID for device in message.devices if device.health == HEALTHY and device.ID)
    )


def registration_check(
    attempt: RegistrationAttempt | None,
    waited_s: float,
    timeout_s: float,
    kubelet_socket: Path,
    exit_note: str | None,
) -> CheckResult:
    """Check 1: the first Register call and what the kubelet would have made of it."""
    findings = Findings(REGISTRATION)
    if attempt is None:
        if exit_note is not None:
            findings.fail(f"the plugin {exit_note} before registering")
        else:
            findings.fail(
                f"no Register call on {kubelet_socket} within {timeout_s:g} s: register with the kubelet "
                "socket in the plugin directory given by {plugin_dir} or $KUBEDEVICE_PLUGIN_DIR "
                "(a DRA driver: serve a registration socket in "
                f"{kubelet_socket.parent.parent / 'plugins_registry'}, given by {{kubelet_dir}} or "
                "$KUBEDEVICE_KUBELET_DIR)"
            )
        return findings.result()
    request = attempt.request
    if attempt.refusal is Refusal.VERSION:
        findings.fail(f'version "{request.version}" refused: send "{VERSION}" ({attempt.message})')
    elif attempt.refusal is Refusal.RESOURCE_NAME:
        findings.fail(
            f'resource name "{request.resource_name}" is not a valid extended resource name '
            f"(use a lower-case vendor domain and a name, e.g. example.com/gpu; not kubernetes.io/)"
        )
    elif attempt.refusal is Refusal.ENDPOINT:
        findings.fail(f"endpoint refused: {attempt.message}")
    elif attempt.refusal is Refusal.NOT_SERVING:
        findings.fail(
            f'the plugin socket "{request.endpoint}" did not answer when Register was called '
            f"({attempt.reason}): serve the DevicePlugin service before calling Register, "
            "the kubelet dials it inside Register"
        )
    elif attempt.refusal is Refusal.OPTIONS:
        findings.fail(f"the kubelet could not read the plugin's options: {attempt.message}")
    else:
        findings.note(
            f'registered "{request.resource_name}" after {waited_s:.2f} s, endpoint "{request.endpoint}", '
            f"version {request.version}"
        )
    return findings.result()


async def list_and_watch_check(feed: ListAndWatchFeed, timeout_s: float) -> Findings:
    """Check 3: the first list comes quickly and holds IDs and health strings the kubelet can use.

    Returns the findings still open: `stream_kept_open` adds to them once the other checks ran.
    """
    findings = Findings(LIST_AND_WATCH)
    if not await feed.wait_first(min(FIRST_LIST_WITHIN_S, timeout_s)):
        if feed.ended.is_set():
            findings.fail(f"ListAndWatch ended before sending a device list ({feed.error})")
            return findings
        findings.fail(
            f"no device list within {FIRST_LIST_WITHIN_S:g} s of ListAndWatch: capacity reads 0 until then"
        )
        if not await feed.wait_first(timeout_s - FIRST_LIST_WITHIN_S):
            detail = f" ({feed.error})" if feed.error else ""
            findings.fail(f"still no device list after {timeout_s:g} s{detail}")
            return findings
        findings.note(f"the first list came after {feed.first_delay_s or 0.0:.2f} s")
    first = feed.first
    assert first is not None  # wait_first returned True
    problems = device_list_problems(first.devices)
    for failure in problems.failures:
        findings.fail(failure)
    for warning in problems.warnings:
        findings.warn(warning)
    size = first.ByteSize()
    if size > MAX_MESSAGE_BYTES:
        findings.warn(
            f"the list is {size} bytes, above gRPC's 4 MiB default the kubelet keeps: its stream would break"
        )
    healthy = healthy_ids(first)
    if not first.devices:
        findings.warn("the first list is empty: capacity and allocatable stay 0")
    elif not healthy:
        findings.warn(f'no device is "{HEALTHY}": allocatable stays 0')
    listed = counted(len(first.devices), "device")
    findings.note(f"{listed}, {len(healthy)} healthy, first message {size} bytes")
    return findings


def stream_kept_open(feed: ListAndWatchFeed, findings: Findings) -> CheckResult:
    """Check 3, end: the stream must outlive the other checks; the kubelet does not reopen it."""
    if feed.first is not None and feed.ended.is_set():
        findings.fail(
            f"ListAndWatch ended after the first list ({feed.error}): the kubelet never reopens it and marks "
            "every device unhealthy; keep the stream open and send a new list when health changes"
        )
    return findings.result()


@dataclass(frozen=True)
class RpcProbe:
    """Whether an advertised RPC answered at all: what the options check reports."""

    answered: bool
    error: str = ""


def options_check(
    registered: dp.DevicePluginOptions,
    served: dp.DevicePluginOptions,
    preferred: RpcProbe | None,
    pre_start: RpcProbe | None,
) -> CheckResult:
    """Check 2: what GetDevicePluginOptions advertises, the plugin does."""
    findings = Findings(OPTIONS)
    if registered != served:
        findings.warn(
            f"RegisterRequest.options ({_options(registered)}) differ from GetDevicePluginOptions "
            f"({_options(served)}): kubelets before v1.26 use the first, newer ones the second"
        )
    if served.get_preferred_allocation_available:
        if preferred is None:
            findings.note("GetPreferredAllocation advertised, not probed (no healthy device)")
        elif preferred.answered:
            findings.note("GetPreferredAllocation advertised and answers")
        else:
            findings.fail(
                "get_preferred_allocation_available is set but GetPreferredAllocation fails: "
                f"{preferred.error}"
            )
    if served.pre_start_required:
        if pre_start is None:
            findings.note("PreStartContainer required, not probed (no healthy device)")
        elif pre_start.answered:
            findings.note("PreStartContainer required and answers")
        else:
            findings.fail(
                f"pre_start_required is set but PreStartContainer fails: {pre_start.error} "
                "(every container using the resource would fail to start)"
            )
    findings.note(_options(served))
    return findings.result()


def _options(options: dp.DevicePluginOptions) -> str:
    return (
        f"pre_start_required={options.pre_start_required}, "
        f"get_preferred_allocation_available={options.get_preferred_allocation_available}"
    )
