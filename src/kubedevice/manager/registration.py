"""The Registration service on kubelet.sock and the checks a RegisterRequest must pass.

Validation order and message texts are the kubelet's. Beyond the kubelet, an endpoint must stay inside
the device plugin directory: the kubelet joins and cleans it, so `../x.sock` would dial outside.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio

from kubedevice.api.constants import SUPPORTED_VERSIONS
from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.manager.errors import RegistrationError
from kubedevice.manager.metrics import ManagerMetrics
from kubedevice.ratelimit import RateLimitedLog, TokenBucket
from kubedevice.resource.names import is_extended_resource_name

log = logging.getLogger(__name__)

#: The longest unix socket path Linux accepts (sun_path is 108 bytes with the terminating NUL).
MAX_UNIX_SOCKET_PATH = 107
#: Refused registrations logged: a burst of 10 lines, then one a second; the rest are counted in the next.
REFUSAL_LOG_QPS = 1.0
REFUSAL_LOG_BURST = 10


def check_version(version: str) -> None:
    if version not in SUPPORTED_VERSIONS:
        supported = "[" + " ".join(f'"{v}"' for v in SUPPORTED_VERSIONS) + "]"
        raise RegistrationError(
            f'requested API version "{version}" is not supported by kubelet. '
            f"Supported version is {supported}",
            invalid=True,
        )


def check_resource_name(name: str) -> None:
    if not is_extended_resource_name(name):
        raise RegistrationError(f'the ResourceName "{name}" is invalid', invalid=True)


def _inside(path: str, directory: str) -> bool:
    return path != directory and os.path.commonpath([path, directory]) == directory


def resolve_endpoint(plugin_dir: Path, endpoint: str) -> str:
    """The socket path of a RegisterRequest endpoint, refused when it would leave `plugin_dir`.

    Blocking (it resolves symlinks): run it in a thread.
    """
    where = f"it must name a socket inside the device plugin directory {plugin_dir}"
    if not endpoint or "\x00" in endpoint:
        raise RegistrationError(f"invalid endpoint {endpoint!r}: {where}", invalid=True)
    if os.path.isabs(endpoint):
        raise RegistrationError(
            f'invalid endpoint "{endpoint}": an absolute path is not allowed; {where}', invalid=True
        )
    directory = os.path.normpath(os.path.abspath(plugin_dir))
    joined = os.path.normpath(os.path.join(directory, endpoint))
    if not _inside(joined, directory):
        raise RegistrationError(
            f'invalid endpoint "{endpoint}": it escapes to {joined}; {where}', invalid=True
        )
    real = os.path.realpath(joined)
    real_directory = os.path.realpath(directory)
    if not _inside(real, real_directory):
        raise RegistrationError(
            f'invalid endpoint "{endpoint}": it resolves through a symlink to {real}; {where}', invalid=True
        )
    if len(joined.encode()) > MAX_UNIX_SOCKET_PATH:
        raise RegistrationError(
            f'invalid endpoint "{endpoint}": socket path {joined} is longer '
            f"than {MAX_UNIX_SOCKET_PATH} bytes",
            invalid=True,
        )
    return joined


#: What the manager does with a registration that passed validation: connect to `socket_path`.
ConnectClient = Callable[[str, str], Awaitable[None]]


class RegistrationServicer(dp_grpc.RegistrationServicer):
    """`v1beta1.Registration`: validate, connect synchronously, answer."""

    def __init__(self, plugin_dir: Path, connect: ConnectClient, metrics: ManagerMetrics) -> None:
        self._plugin_dir = plugin_dir
        self._connect = connect
        self._metrics = metrics
        # A caller looping on Register must not fill the log.
        self._refusals = RateLimitedLog(log, TokenBucket(REFUSAL_LOG_QPS, REFUSAL_LOG_BURST))

    async def Register(
        self, request: dp.RegisterRequest, context: grpc.aio.ServicerContext[dp.RegisterRequest, dp.Empty]
    ) -> dp.Empty:
        # Counted before validation, so refused attempts show too.
        self._metrics.registration_total.labels(resource_name=request.resource_name).inc()
        log.debug(
            "Register: resource %s, endpoint %s, version %s, preStartRequired %s, "
            "getPreferredAllocationAvailable %s",
            request.resource_name,
            request.endpoint,
            request.version,
            request.options.pre_start_required,
            request.options.get_preferred_allocation_available,
        )
        try:
            check_version(request.version)
            check_resource_name(request.resource_name)
            socket_path = await asyncio.to_thread(resolve_endpoint, self._plugin_dir, request.endpoint)
            await self._connect(request.resource_name, socket_path)
        except RegistrationError as err:
            self._log_refusal(request.resource_name, err)
            code = grpc.StatusCode.INVALID_ARGUMENT if err.invalid else grpc.StatusCode.UNKNOWN
            await context.abort(code, str(err))
        return dp.Empty()

    def _log_refusal(self, resource_name: str, err: RegistrationError) -> None:
        """The kubelet's line for a refused registration, within the log's rate limit."""
        what = (
            "Bad registration request from device plugin"
            if err.invalid
            else "Error connecting to device plugin client"
        )
        self._refusals.log(logging.WARNING, "%s for resource %r: %s", what, resource_name, err)
