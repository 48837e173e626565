"""`PUT /claims/<ns>/<name>/status?driver=<driver>`: a DRA driver writes its entries of the claim's
`status.devices` (controlplane.device_status decides). The answer is the claim as the API server would return
it, once the update is on disk, or the API server's failure Status: 400 (not JSON, not the API's shape, no
driver named), 403 (a driver without a device in the claim), 404 (no such claim), 409 (not allocated), 422
(Invalid: every field error with its path, in `details.causes`)."""

from __future__ import annotations

import json
from typing import Any

from kubedevice.controlplane.device_status import StatusRefusal
from kubedevice.controlplane.plane import ControlPlane
from kubedevice.resource.claim_json import claim_json
from kubedevice.resource.fields import DocumentError, check_text
from kubedevice.statusapi import contract
from kubedevice.statusapi.http import PutRequest, Response

__all__ = ["put_claim_status"]


async def put_claim_status(control: ControlPlane, request: PutRequest) -> Response:
    where = contract.parse_claim_path(request.rest, status=True)
    if where is None:
        if contract.parse_claim_path(request.rest, status=False) is not None:
            claim = f"{contract.CLAIM_PREFIX}{request.rest}"
            return Response.json(
                {
                    "error": f"method PUT not allowed on {claim}; a driver PUTs "
                    f"{claim}/{contract.STATUS_SUBRESOURCE}"
                },
                405,
            )
        return Response.json(contract.no_such_claim_path(request.rest), 404)
    namespace, name = where
    driver = request.query.get(contract.DRIVER_PARAMETER, "")
    if not driver:
        return _bad_request(
            f"no writing driver: add ?{contract.DRIVER_PARAMETER}=<driver name> (a driver writes the entries "
            "of its own devices)"
        )
    try:
        body = _json(request.body)
    except ValueError as err:
        return _bad_request(f"the body is not JSON: {err}")
    outcome = await control.put_device_status(namespace, name, driver, body)
    if not isinstance(outcome, StatusRefusal):
        return Response.json(claim_json(outcome))
    if outcome.reason == "NotFound":
        return Response.json(contract.claim_not_found(name), 404)
    causes = [c.cause() for c in outcome.causes]
    return Response.json(
        contract.failure(outcome.code, outcome.reason, outcome.message, causes), outcome.code
    )


def _json(body: bytes) -> Any:
    """The body's JSON value; ValueError for what Go's decoder refuses too (NaN, a lone surrogate)."""

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    try:
        value = json.loads(body.decode(), parse_constant=constant)
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 ({err.reason} at byte {err.start})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    try:
        check_text(value)
    except DocumentError as err:
        raise ValueError(str(err)) from None
    return value


def _bad_request(message: str) -> Response:
    return Response.json(contract.failure(400, "BadRequest", message), 400)
