"""The daemon's claims contract served by a stand-in kubelet: `/node` with the node's name and
`/claims/<namespace>/<name>` from a table, on `<kubelet_dir>/kubedevice.sock`.

What a standalone DRA driver asks of the node daemon, for the conformance checker's and the testing
kit's kubelets, which run no daemon: a claim not in the table is the daemon's NotFound answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubedevice.statusapi import contract
from kubedevice.statusapi.http import Response, StatusServer


class StandInStatusAPI:
    """`/node` names `node_name`; each claim put is served until the server stops."""

    def __init__(self, kubelet_dir: Path, node_name: str) -> None:
        self.socket = kubelet_dir / contract.SOCKET_NAME
        self.node_name = node_name
        #: (namespace, name) -> the claim's resource.k8s.io/v1 JSON, made when it is asked for.
        self._claims: dict[tuple[str, str], Callable[[], dict[str, Any]]] = {}
        self._server = StatusServer(
            {contract.NODE: lambda: Response.json(contract.node_answer(self.node_name))},
            {contract.CLAIM_PREFIX: self._claim},
        )

    def put_claim(self, namespace: str, name: str, answer: Callable[[], dict[str, Any]]) -> None:
        """Serve `answer()` at `/claims/<namespace>/<name>`."""
        self._claims[(namespace, name)] = answer

    async def start(self) -> None:
        await self._server.start(self.socket)

    async def stop(self) -> None:
        await self._server.stop()

    def _claim(self, rest: str) -> Response:
        return Response.json(*contract.answer_claim(rest, self._lookup))

    def _lookup(self, namespace: str, name: str) -> dict[str, Any] | None:
        answer = self._claims.get((namespace, name))
        return answer() if answer is not None else None
