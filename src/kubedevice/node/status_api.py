"""The status API's routes over the started daemon's parts: `/node`, `/pods`, `/claims`,
`/claims/<ns>/<name>` (and its `/status`, which a driver PUTs), `/resourceslices` (with the
DeviceTaintRules and their status), `/metrics`, `/healthz`.

The views are imported on the first request: the daemon serves its sockets without them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from kubedevice.statusapi import contract
from kubedevice.statusapi.http import Handler, PrefixHandler, PutHandler, PutRequest, Response

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubedevice.controlplane.plane import ControlPlane
    from kubedevice.dra import DRAManager
    from kubedevice.manager import DeviceManager
    from kubedevice.node.pods import PodTable
    from kubedevice.node.taint_eviction import TaintEvictionController
    from kubedevice.topology import TopologyManager


@dataclass(frozen=True, slots=True)
class StatusAPI:
    manager: DeviceManager
    topology: TopologyManager
    scope: str
    checkpoint: Path
    control: ControlPlane
    dra: DRAManager
    node_name: str
    pods: PodTable
    bad_files: Callable[[], Mapping[str, str]]
    registry: CollectorRegistry
    evictions: TaintEvictionController

    def routes(self) -> dict[str, Handler]:
        return {
            contract.HEALTHZ: lambda: Response.text("ok\n"),
            contract.METRICS: self._metrics,
            contract.NODE: self._node,
            contract.PODS: self._pods,
            contract.CLAIMS: self._claims,
            contract.RESOURCESLICES: self._slices,
        }

    def prefixes(self) -> dict[str, PrefixHandler]:
        return {contract.CLAIM_PREFIX: self._claim}

    def puts(self) -> dict[str, PutHandler]:
        return {contract.CLAIM_PREFIX: self._put_claim_status}

    async def _put_claim_status(self, request: PutRequest) -> Response:
        from kubedevice.node.claim_status import put_claim_status

        return await put_claim_status(self.control, request)

    def _node(self) -> Response:
        from kubedevice.node import views
        from kubedevice.node.claim_views import node_dra_view

        view = views.node_view(self.manager, self.checkpoint, self.topology, self.scope)
        warnings = self.control.coexistence_warnings(view["resources"])
        view.update(
            node_dra_view(self.node_name, self.dra, self.control.slices, warnings, self.control.node_labels)
        )
        return Response.json(view)

    def _pods(self) -> Response:
        from kubedevice.node import views
        from kubedevice.node.claim_views import DRAPodView

        claims = DRAPodView(self.control, self.dra)
        view = views.pods_view(self.manager, self.pods, self.bad_files(), self.topology, claims)
        pending = self.evictions.pod_views()
        for pod in view["pods"]:
            pod["pendingEviction"] = pending.get(pod["uid"])
        return Response.json(view)

    def _claims(self) -> Response:
        from kubedevice.node.claim_views import claims_view

        return Response.json(claims_view(self.control, self.dra, self.pods))

    def _claim(self, rest: str) -> Response:
        from kubedevice.node.claim_views import claim_answer

        return Response.json(*contract.answer_claim(rest, partial(claim_answer, self.control)))

    def _slices(self) -> Response:
        from kubedevice.node.claim_views import slices_view

        return Response.json(
            {**slices_view(self.control.slices), "deviceTaintRules": self.evictions.rules_view()}
        )

    def _metrics(self) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
