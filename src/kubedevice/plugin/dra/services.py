"""The gRPC services of the DRA face: DRAPlugin v1 and v1beta1 (one implementation), and registration.

The two DRAPlugin generations have byte-identical messages except v1's `Device.share_id`, so one
function builds either answer from the module of its generation. A call that fails as a whole is
answered with status Unknown, as a Go server answers a plain error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

import grpc

from kubedevice.api.constants import DRA_PLUGIN_TYPE
from kubedevice.api.dra.v1 import api_pb2 as v1
from kubedevice.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubedevice.api.dra.v1beta1 import api_pb2 as v1beta1
from kubedevice.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubedevice.plugin.dra.model import ClaimRef
from kubedevice.plugin.dra.prepare import CallFailed, ClaimPreparer
from kubedevice.plugin.events import EventBus, EventKind

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]


async def _prepare(preparer: ClaimPreparer, pb: ModuleType, request: Any, context: Context) -> Any:
    refs = [ClaimRef(c.uid, c.namespace, c.name) for c in request.claims]
    try:
        answers = await preparer.prepare(refs)
    except CallFailed as exc:
        log.error("NodePrepareResources failed: %s", exc)
        await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
    response = pb.NodePrepareResourcesResponse()
    for uid, answer in answers.items():
        entry = response.claims[uid]
        if answer.error:
            entry.error = answer.error
            continue
        for device in answer.devices:
            wire = entry.devices.add(
                request_names=device["request_names"],
                pool_name=device["pool_name"],
                device_name=device["device_name"],
                cdi_device_ids=device["cdi_device_ids"],
            )
            if "share_id" in device and pb is v1:  # v1beta1 has no share IDs
                wire.share_id = device["share_id"]
    return response


async def _unprepare(preparer: ClaimPreparer, pb: ModuleType, request: Any, context: Context) -> Any:
    refs = [ClaimRef(c.uid, c.namespace, c.name) for c in request.claims]
    try:
        errors = await preparer.unprepare(refs)
    except CallFailed as exc:
        log.error("NodeUnprepareResources failed: %s", exc)
        await context.abort(grpc.StatusCode.UNKNOWN, str(exc))
    response = pb.NodeUnprepareResourcesResponse()
    for uid, error in errors.items():
        response.claims[uid].error = error  # an entry for every claim, even without error
    return response


class DRAPluginV1(v1_grpc.DRAPluginServicer):
    def __init__(self, preparer: ClaimPreparer) -> None:
        self._preparer = preparer

    async def NodePrepareResources(
        self, request: v1.NodePrepareResourcesRequest, context: Context
    ) -> v1.NodePrepareResourcesResponse:
        response: v1.NodePrepareResourcesResponse = await _prepare(self._preparer, v1, request, context)
        return response

    async def NodeUnprepareResources(
        self, request: v1.NodeUnprepareResourcesRequest, context: Context
    ) -> v1.NodeUnprepareResourcesResponse:
        response: v1.NodeUnprepareResourcesResponse = await _unprepare(self._preparer, v1, request, context)
        return response


class DRAPluginV1beta1(v1beta1_grpc.DRAPluginServicer):
    def __init__(self, preparer: ClaimPreparer) -> None:
        self._preparer = preparer

    async def NodePrepareResources(
        self, request: v1beta1.NodePrepareResourcesRequest, context: Context
    ) -> v1beta1.NodePrepareResourcesResponse:
        response: v1beta1.NodePrepareResourcesResponse = await _prepare(
            self._preparer, v1beta1, request, context
        )
        return response

    async def NodeUnprepareResources(
        self, request: v1beta1.NodeUnprepareResourcesRequest, context: Context
    ) -> v1beta1.NodeUnprepareResourcesResponse:
        response: v1beta1.NodeUnprepareResourcesResponse = await _unprepare(
            self._preparer, v1beta1, request, context
        )
        return response


class DRARegistrationService(reg_grpc.RegistrationServicer):
    """pluginregistration.Registration of a DRA driver: who we are, and the kubelet's verdict."""

    def __init__(
        self,
        driver: str,
        endpoint: str,
        versions: list[str],
        events: EventBus,
        on_registered: Callable[[], None],
    ) -> None:
        self._driver = driver
        self._endpoint = endpoint
        self._versions = versions
        self._events = events
        self._on_registered = on_registered
        self.statuses: list[reg.RegistrationStatus] = []

    async def GetInfo(self, request: reg.InfoRequest, context: Context) -> reg.PluginInfo:
        return reg.PluginInfo(
            type=DRA_PLUGIN_TYPE,
            name=self._driver,
            endpoint=self._endpoint,
            supported_versions=self._versions,
        )

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: Context
    ) -> reg.RegistrationStatusResponse:
        self.statuses.append(request)
        self._events.emit(
            EventKind.WATCHER_STATUS,
            registered=str(request.plugin_registered).lower(),
            error=request.error or "-",
        )
        if not request.plugin_registered:
            log.error("the kubelet refused DRA driver %s: %s", self._driver, request.error)
            await context.abort(grpc.StatusCode.UNKNOWN, f"failed registration process: {request.error}")
        log.info("DRA driver %s registered with the kubelet", self._driver)
        self._on_registered()
        return reg.RegistrationStatusResponse()
