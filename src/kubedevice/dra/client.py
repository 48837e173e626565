"""One registered endpoint of a DRA driver: its gRPC channel, its connection state and the two calls.

The kubelet's `DRAPlugin` with its `monitoredPlugin` (D3): the channel is made at registration and asked to
connect at once; its connectivity is followed, and on a disconnect gRPC is asked to connect again at once,
so a plugin restarted on the same socket is found again without registering again. Each call has the
driver's deadline and is counted in `dra_grpc_operations_duration_seconds`; a failed call raises
DRACallError with Go's text.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from kubedevice.api.constants import (
    DRA_CALL_TIMEOUT_S,
    DRA_V1_GRPC_SERVICE,
    DRA_V1_SERVICE,
    DRA_V1BETA1_GRPC_SERVICE,
    DRA_V1BETA1_SERVICE,
)
from kubedevice.api.dra.v1 import api_pb2 as v1
from kubedevice.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubedevice.api.dra.v1beta1 import api_pb2 as v1beta1
from kubedevice.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubedevice.checkpoint.dra_model import DRADevice
from kubedevice.dra.errors import DRACallError
from kubedevice.dra.metrics import DRAMetrics
from kubedevice.dra.types import DriverClaim
from kubedevice.tasks import cancel_and_wait

log = logging.getLogger(__name__)

#: The longest wait between two connection attempts to an endpoint that is gone (gRPC's default is 120 s;
#: a local socket is cheap to try, and a restarted plugin is then found within seconds).
MAX_RECONNECT_BACKOFF_S = 5.0

_GO_CODE_NAMES = {
    grpc.StatusCode.OK: "OK",
    grpc.StatusCode.CANCELLED: "Canceled",
    grpc.StatusCode.UNKNOWN: "Unknown",
    grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
    grpc.StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
    grpc.StatusCode.NOT_FOUND: "NotFound",
    grpc.StatusCode.ALREADY_EXISTS: "AlreadyExists",
    grpc.StatusCode.PERMISSION_DENIED: "PermissionDenied",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "ResourceExhausted",
    grpc.StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
    grpc.StatusCode.ABORTED: "Aborted",
    grpc.StatusCode.OUT_OF_RANGE: "OutOfRange",
    grpc.StatusCode.UNIMPLEMENTED: "Unimplemented",
    grpc.StatusCode.INTERNAL: "Internal",
    grpc.StatusCode.UNAVAILABLE: "Unavailable",
    grpc.StatusCode.DATA_LOSS: "DataLoss",
    grpc.StatusCode.UNAUTHENTICATED: "Unauthenticated",
}


def go_code_name(code: grpc.StatusCode) -> str:
    """Go's `codes.Code.String()`: `DeadlineExceeded`, not `DEADLINE_EXCEEDED`."""
    return _GO_CODE_NAMES.get(code, code.name)


def go_rpc_error(err: grpc.aio.AioRpcError) -> str:
    """Go's text of a failed call, `rpc error: code = <Code> desc = <message>`."""
    code = err.code()
    desc = "context deadline exceeded" if code == grpc.StatusCode.DEADLINE_EXCEEDED else err.details()
    return f"rpc error: code = {go_code_name(code)} desc = {desc or ''}"


@dataclass(frozen=True, slots=True)
class PrepareResult:
    """One claim's entry of a NodePrepareResources response: its devices, or an error ("" for none)."""

    devices: tuple[DRADevice, ...]
    error: str


def _device(d: v1.Device | v1beta1.Device) -> DRADevice:
    share_id = d.share_id if isinstance(d, v1.Device) and d.HasField("share_id") else None
    return DRADevice(
        pool_name=d.pool_name,
        device_name=d.device_name,
        # An empty repeated field is Go's nil slice.
        request_names=tuple(d.request_names) or None,
        cdi_device_ids=tuple(d.cdi_device_ids) or None,
        share_id=share_id,
    )


class DRAPluginClient:
    """The DRAPlugin service of one endpoint of `driver`, through `service` ("v1.DRAPlugin" or
    "v1beta1.DRAPlugin"). Made on the event loop; it connects at once. `on_connection_change` is called
    with the client whenever `connected` changes."""

    def __init__(
        self,
        driver: str,
        endpoint: str,
        service: str,
        *,
        metrics: DRAMetrics,
        call_timeout: float = DRA_CALL_TIMEOUT_S,
        health_service: str | None = None,
        on_connection_change: Callable[[DRAPluginClient], None] | None = None,
    ) -> None:
        if service == DRA_V1_SERVICE:
            self._v1 = True
            grpc_service = DRA_V1_GRPC_SERVICE
        elif service == DRA_V1BETA1_SERVICE:
            self._v1 = False
            grpc_service = DRA_V1BETA1_GRPC_SERVICE
        else:
            raise ValueError(f"unsupported DRAPlugin service {service!r}")
        self.driver = driver
        self.endpoint = endpoint
        self.service = service
        self.health_service = health_service
        self.call_timeout = call_timeout
        self._metrics = metrics
        self._prepare_path = f"/{grpc_service}/NodePrepareResources"
        self._unprepare_path = f"/{grpc_service}/NodeUnprepareResources"
        self._on_change = on_connection_change
        self._connected = False
        self._closed = False
        self.channel = grpc.aio.insecure_channel(
            "unix:" + endpoint,
            options=(
                ("grpc.default_authority", "localhost"),
                ("grpc.max_reconnect_backoff_ms", int(MAX_RECONNECT_BACKOFF_S * 1000)),
            ),
        )
        self._stub: Any = (v1_grpc if self._v1 else v1beta1_grpc).DRAPluginStub(self.channel)
        self._watch = asyncio.create_task(self._follow_connectivity(), name=f"DRA {driver} {endpoint}")

    @property
    def connected(self) -> bool:
        """The channel is connected to the endpoint now (gRPC READY)."""
        return self._connected

    def __repr__(self) -> str:
        return f"DRAPluginClient({self.driver!r}, {self.endpoint!r}, {self.service!r})"

    async def _follow_connectivity(self) -> None:
        # try_to_connect=True on every look: connect now, and connect again at once after a disconnect
        # (a channel that lost its connection goes idle and would otherwise wait for a call).
        state = self.channel.get_state(try_to_connect=True)
        while not self._closed:
            connected = state == grpc.ChannelConnectivity.READY
            if connected != self._connected:
                self._connected = connected
                log.info(
                    "DRA driver %s plugin at %s %s",
                    self.driver,
                    self.endpoint,
                    "connected" if connected else "disconnected",
                )
                if self._on_change is not None:
                    try:
                        self._on_change(self)
                    except Exception:
                        log.exception("handling a connection change of %r failed", self)
            await self.channel.wait_for_state_change(state)
            state = self.channel.get_state(try_to_connect=True)

    async def _call(self, path: str, method: Any, request: Any) -> Any:
        start = time.perf_counter()
        code = grpc.StatusCode.OK
        try:
            return await method(request, timeout=self.call_timeout)
        except grpc.aio.AioRpcError as err:
            code = err.code()
            raise DRACallError(go_rpc_error(err)) from None
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        finally:
            self._metrics.grpc_operations.labels(self.driver, path, go_code_name(code)).observe(
                time.perf_counter() - start
            )

    async def node_prepare_resources(self, claims: Sequence[DriverClaim]) -> dict[str, PrepareResult]:
        """claim UID -> result, as the plugin answered (missing or unknown UIDs are the caller's to judge)."""
        pb = v1 if self._v1 else v1beta1
        request = pb.NodePrepareResourcesRequest(
            claims=[pb.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
        )
        response = await self._call(self._prepare_path, self._stub.NodePrepareResources, request)
        return {
            uid: PrepareResult(tuple(_device(d) for d in result.devices), result.error)
            for uid, result in response.claims.items()
        }

    async def node_unprepare_resources(self, claims: Sequence[DriverClaim]) -> dict[str, str]:
        """claim UID -> error text ("" for success), as the plugin answered."""
        pb = v1 if self._v1 else v1beta1
        request = pb.NodeUnprepareResourcesRequest(
            claims=[pb.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
        )
        response = await self._call(self._unprepare_path, self._stub.NodeUnprepareResources, request)
        return {uid: result.error for uid, result in response.claims.items()}

    async def close(self) -> None:
        """Close the channel; no more connection changes are reported. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await cancel_and_wait(self._watch)
        self._connected = False
        await self.channel.close(None)
