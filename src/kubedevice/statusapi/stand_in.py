"""The daemon's claims contract served by a stand-in kubelet: `/node` with the node's name, `/claims` and
`/claims/<namespace>/<name>` from a table, and a driver's `PUT /claims/<ns>/<name>/status?driver=`, on
`<kubelet_dir>/kubedevice.sock`.

What a standalone DRA driver asks of the node daemon, for the conformance checker's and the testing
kit's kubelets, which run no daemon: a claim not in the table is the daemon's NotFound answer. A status
PUT replaces the writing driver's `status.devices` entries and keeps the others', as the daemon does;
the entries are read for their shape only (the daemon validates them as the API server does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubedevice.resource.device_status import StatusDecodeError, read_device_statuses
from kubedevice.statusapi import contract
from kubedevice.statusapi.http import PutRequest, Response, StatusServer


class StandInStatusAPI:
    """`/node` names `node_name`; each claim put is served until the server stops."""

    def __init__(self, kubelet_dir: Path, node_name: str) -> None:
        self.socket = kubelet_dir / contract.SOCKET_NAME
        self.node_name = node_name
        #: (namespace, name) -> the claim's resource.k8s.io/v1 JSON, made when it is asked for.
        self._claims: dict[tuple[str, str], Callable[[], dict[str, Any]]] = {}
        #: (namespace, name) -> `status.devices` as the drivers wrote it (PUT).
        self._device_status: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._server = StatusServer(
            {
                contract.NODE: lambda: Response.json(contract.node_answer(self.node_name)),
                contract.CLAIMS: lambda: Response.json(self._claims_view()),
            },
            {contract.CLAIM_PREFIX: self._claim},
            {contract.CLAIM_PREFIX: self._put_status},
        )

    def put_claim(self, namespace: str, name: str, answer: Callable[[], dict[str, Any]]) -> None:
        """Serve `answer()` at `/claims/<namespace>/<name>`."""
        self._claims[(namespace, name)] = answer

    def device_status(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The claim's `status.devices` as the drivers wrote them (empty when none did)."""
        return list(self._device_status.get((namespace, name), []))

    async def start(self) -> None:
        await self._server.start(self.socket)

    async def stop(self) -> None:
        await self._server.stop()

    def _claim(self, rest: str) -> Response:
        return Response.json(*contract.answer_claim(rest, self._lookup))

    def _lookup(self, namespace: str, name: str) -> dict[str, Any] | None:
        answer = self._claims.get((namespace, name))
        if answer is None:
            return None
        claim = answer()
        written = self._device_status.get((namespace, name))
        if written is not None:
            claim = {**claim, "status": {**(claim.get("status") or {}), "devices": written}}
        return claim

    def _claims_view(self) -> dict[str, Any]:
        """`/claims` as the daemon answers it, in the fields a driver reads."""
        out = []
        for namespace, name in sorted(self._claims):
            claim = self._lookup(namespace, name) or {}
            status = claim.get("status") or {}
            out.append(
                {
                    "namespace": namespace,
                    "name": name,
                    "uid": (claim.get("metadata") or {}).get("uid"),
                    "allocation": status.get("allocation"),
                    "statusDevices": status.get("devices") or [],
                }
            )
        return {"claims": out}

    async def _put_status(self, request: PutRequest) -> Response:
        where = contract.parse_claim_path(request.rest, status=True)
        if where is None:
            return Response.json(contract.no_such_claim_path(request.rest), 404)
        driver = request.query.get(contract.DRIVER_PARAMETER, "")
        claim = self._lookup(*where)
        if claim is None:
            return Response.json(contract.claim_not_found(where[1]), 404)
        try:
            body = json.loads(request.body)
            entries = read_device_statuses(body.get("devices") if isinstance(body, dict) else None)
        except (ValueError, StatusDecodeError) as err:
            return Response.json(contract.failure(400, "BadRequest", str(err)), 400)
        if not driver or any(e.driver != driver for e in entries):
            message = (
                f"a driver writes its own entries: name it with ?{contract.DRIVER_PARAMETER}=<driver name>"
            )
            return Response.json(contract.failure(400, "BadRequest", message), 400)
        kept = [e for e in (claim.get("status") or {}).get("devices") or [] if e.get("driver") != driver]
        self._device_status[where] = kept + [e.to_json() for e in entries]
        answer = self._lookup(*where)
        return Response.json(answer or {})
