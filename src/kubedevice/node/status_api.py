"""The status API's routes over the started daemon's parts: `/node`, `/pods`, `/claims`,
`/claims/<ns>/<name>`, `/resourceslices`, `/metrics`, `/healthz`.

The views are imported on the first request: the daemon serves its sockets without them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubedevice.statusapi.http import Handler, PrefixHandler, Response

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubedevice.controlplane.plane import ControlPlane
    from kubedevice.dra import DRAManager
    from kubedevice.manager import DeviceManager
    from kubedevice.node.pods import PodTable
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

    def routes(self) -> dict[str, Handler]:
        return {
            "/healthz": lambda: Response.text("ok\n"),
            "/metrics": self._metrics,
            "/node": self._node,
            "/pods": self._pods,
            "/claims": self._claims,
            "/resourceslices": self._slices,
        }

    def prefixes(self) -> dict[str, PrefixHandler]:
        return {"/claims/": self._claim}

    def _node(self) -> Response:
        from kubedevice.node import views
        from kubedevice.node.claim_views import node_dra_view

        view = views.node_view(self.manager, self.checkpoint, self.topology, self.scope)
        warnings = self.control.coexistence_warnings(view["resources"])
        view.update(node_dra_view(self.node_name, self.dra, self.control.slices, warnings))
        return Response.json(view)

    def _pods(self) -> Response:
        from kubedevice.node import views
        from kubedevice.node.claim_views import DRAPodView

        claims = DRAPodView(self.control, self.dra)
        return Response.json(
            views.pods_view(self.manager, self.pods, self.bad_files(), self.topology, claims)
        )

    def _claims(self) -> Response:
        from kubedevice.node.claim_views import claims_view

        return Response.json(claims_view(self.control, self.dra, self.pods))

    def _claim(self, rest: str) -> Response:
        from kubedevice.node.claim_views import claim_answer, claim_path, not_found

        where = claim_path(rest)
        if where is None:
            return Response.json(
                {"error": f"no such path /claims/{rest}; try /claims/<namespace>/<name>"}, 404
            )
        claim = claim_answer(self.control, *where)
        return Response.json(claim) if claim is not None else Response.json(not_found(where[1]), 404)

    def _slices(self) -> Response:
        from kubedevice.node.claim_views import slices_view

        return Response.json(slices_view(self.control.slices))

    def _metrics(self) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
